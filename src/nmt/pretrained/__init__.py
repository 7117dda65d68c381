"""Models trained elsewhere, in and out of nmt: Marian / OPUS-MT (the Hugging Face layout and Marian's own)."""
