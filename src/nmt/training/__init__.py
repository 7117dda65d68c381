"""Training: loss, learning-rate schedule, the training loop."""
