"""Both HTTP APIs against the OpenAPI description the server publishes (/openapi.json, made by
nmt.server.api_schema): schemathesis' requests on a real `nmt serve`, and what the description says.

The schemathesis run is short and deterministic (the same requests every run: a few generated examples
per operation, a few stateful sequences along the links); fuzz/api runs the same checks for as long as
asked, with schemathesis' coverage phase too (its boundary values: ~400 requests, half a minute here).
A failure prints schemathesis' own report, with a curl line that reproduces each finding.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from nmt.server import ServerLimits, create_app
from nmt.server.libretranslate import LibreTranslateError, count_field, yes_or_no

FUZZ_DIR = Path(__file__).resolve().parents[1] / "fuzz"
sys.path.insert(0, str(FUZZ_DIR))

from api_check import check, serving  # noqa: E402

LOCAL = "http://127.0.0.1"
INFO = {"model": "stub", "parameters": 0, "src_lang": "de", "tgt_lang": "en", "device": "cpu"}
EXAMPLES = 8  # per operation, and stateful scenarios


@pytest.fixture(scope="module")
def served(tiny_model_dir, tmp_path_factory):
    """`nmt serve` on a copy of the tiny model (serving may write beside it), on nmt's own engine, whose
    answers carry attention and alignments: every field of the description is reached."""
    model_dir = shutil.copytree(tiny_model_dir, tmp_path_factory.mktemp("api_schema") / "model")
    with serving(model_dir, "--engine", "torch") as url:
        yield url


@pytest.mark.skipif(importlib.util.find_spec("schemathesis") is None, reason="schemathesis is not installed")
def test_schemathesis_finds_every_answer_as_the_schema_says(served):
    outcome = check(served, examples=EXAMPLES, phases=("fuzzing", "stateful"))
    assert outcome.report, f"schemathesis wrote no report:\n{outcome.output[-6000:]}"
    assert outcome.exit_code == 0 and not outcome.failures, outcome.output[-12000:]
    assert outcome.report["operations"]["tested"] == outcome.report["operations"]["total"] >= 12
    # the file's translation was fetched through the link in the answer, at least once
    assert outcome.links_covered >= 1, outcome.output[-6000:]
    answered = outcome.per_operation()
    assert all(answered[f"POST {path}"] > 0 for path in ("/translate", "/translate_file", "/detect")), outcome.summary()


# --- what the description says, read without a server ---------------------------------------------------
@pytest.fixture(scope="module")
def schema():
    from test_server import EchoTranslator  # noqa: PLC0415 - a stub with every capability

    limits = ServerLimits(max_sentences=3, max_chars=50, max_beam=4)
    with TestClient(create_app(EchoTranslator(), limits, info=INFO), base_url=LOCAL) as client:
        response = client.get("/openapi.json")
        assert response.status_code == 200
        return response.json()


def test_the_request_bodies_carry_the_server_s_limits_and_languages(schema):
    body = schema["paths"]["/translate"]["post"]["requestBody"]["content"]
    nmt, libre = body["application/json"]["schema"]["anyOf"]
    assert nmt["properties"]["text"] == {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 50}}
    assert nmt["properties"]["beam"]["anyOf"][0] == {"type": "integer", "minimum": 1, "maximum": 4}
    assert nmt["additionalProperties"] is False  # a misspelt field is a 422
    assert libre["properties"]["source"]["enum"] == ["auto", "de"]
    assert libre["properties"]["target"]["enum"] == ["en"]
    form = body["application/x-www-form-urlencoded"]["schema"]
    assert form["required"] == ["q", "source", "target"] and form["properties"]["q"]["minLength"] == 1


def test_a_translated_file_links_to_its_download(schema):
    ok = schema["paths"]["/translate_file"]["post"]["responses"]["200"]
    link = ok["links"]["DownloadFile"]
    assert link["operationId"] == schema["paths"]["/download_file/{name}"]["get"]["operationId"]
    assert link["parameters"]["name"].startswith("$response.body#/translatedFileUrl")
    upload = schema["paths"]["/translate_file"]["post"]["requestBody"]["content"]
    assert list(upload) == ["multipart/form-data"]
    assert upload["multipart/form-data"]["schema"]["properties"]["file"]["format"] == "binary"


def test_each_answer_names_its_own_content_type(schema):
    paths = schema["paths"]
    assert list(paths["/metrics"]["get"]["responses"]["200"]["content"]) == ["text/plain"]
    assert list(paths["/"]["get"]["responses"]["200"]["content"]) == ["text/html"]
    assert list(paths["/"]["get"]["responses"]["403"]["content"]) == ["application/json"]
    downloads = paths["/download_file/{name}"]["get"]["responses"]["200"]["content"]
    assert {"text/plain", "application/epub+zip", "text/vtt"} <= set(downloads)
    assert "Retry-After" in paths["/translate"]["post"]["responses"]["503"]["headers"]
    assert set(paths["/readyz"]["get"]["responses"]) == {"200", "503"}  # probes: whatever the Host, no 403


def test_libretranslate_s_quality_field_and_answer_are_described(schema):
    body = schema["paths"]["/translate"]["post"]["requestBody"]["content"]
    _, libre = body["application/json"]["schema"]["anyOf"]
    form = body["application/x-www-form-urlencoded"]["schema"]
    as_json, in_form = libre["properties"]["quality"], form["properties"]["quality"]
    assert {"type": "boolean"} in as_json["anyOf"] and {"type": "null"} in as_json["anyOf"]
    pattern = re.compile(in_form["pattern"])
    for word in ("true", " TRUE ", "1", "on", "Yes", "false", "0", "off", "no", ""):  # what yes_or_no takes
        assert pattern.search(word) and yes_or_no(word, "quality") in (True, False)
    for word in ("maybe", "2", "truefalse", "y"):  # what it refuses
        assert not pattern.search(word)
        with pytest.raises(LibreTranslateError):
            yes_or_no(word, "quality")
    answer = schema["components"]["schemas"]["LibreTranslation"]["properties"]["quality"]
    one = {"$ref": "#/components/schemas/TextQuality"}
    assert one in answer["anyOf"] and {"type": "array", "items": one} in answer["anyOf"]  # a list where q was one
    quality = schema["components"]["schemas"]["TextQuality"]
    assert quality["required"] == ["score", "doubtful"]
    assert quality["properties"]["score"]["anyOf"] == [{"type": "number"}, {"type": "null"}]


def test_the_alternatives_the_description_allows_are_those_the_server_takes(schema):
    """Found by schemathesis: JSON's "alternatives": "" was taken (as none) where the description allowed
    only an integer or null. Each value is held to both: the description and the server's reading."""
    jsonschema = pytest.importorskip("jsonschema")
    body = schema["paths"]["/translate"]["post"]["requestBody"]["content"]
    as_json = body["application/json"]["schema"]["anyOf"][1]["properties"]["alternatives"]
    in_form = body["application/x-www-form-urlencoded"]["schema"]["properties"]["alternatives"]

    def taken(value) -> bool:
        try:
            return count_field(value) <= 4  # parse_translate's bound; a negative count is none
        except LibreTranslateError:
            return False

    takes = ["", "2", " 4 ", "+0", "004", "-3", "-0", 3, 2.0, -7, None]
    refuses = ["5", 5, "٣", "1_0", " ", "two", "2.0", "- 1", True, {}, 2.5, [1]]
    for value in takes + refuses:
        described = jsonschema.Draft202012Validator(as_json).is_valid(value)
        assert described == taken(value) == (value in takes), value
        if isinstance(value, str):  # a form sends only strings
            assert jsonschema.Draft202012Validator(in_form).is_valid(value) == described, value
