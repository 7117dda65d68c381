"""The web page in a real browser: headless Chromium types a sentence, translates, and sees the heatmap.

Needs the Debian packages `chromium` and `chromium-driver` (CI installs them); skipped without them.
"""

import shutil

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait
from served import nmt_serve

from nmt.inference.engine_choice import ctranslate2_installed
from nmt.server import ServerLimits, create_app, model_info, serve_in_thread
from nmt.translator import Translation, Translator

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER), reason="needs Chromium: apt-get install -y chromium chromium-driver"
)

SENTENCE = "Ein Mann fährt Fahrrad."


class CountingTranslator:
    """A Translator that counts its calls, to show the selectors re-draw without asking the server."""

    def __init__(self, translator: Translator):
        self.translator, self.decode, self.engine, self.calls = translator, translator.decode, translator.engine, 0
        self.check_request, self.check_languages = translator.check_request, translator.check_languages
        self.target_languages = translator.target_languages

    def translate_detailed(self, texts, request, **options):
        self.calls += 1
        return self.translator.translate_detailed(texts, request, **options)


@pytest.fixture(scope="module")
def translator(tiny_model_dir):
    return CountingTranslator(Translator.load(tiny_model_dir, device="cpu"))


@pytest.fixture(scope="module")
def url(translator, tiny_model_dir):
    app = create_app(translator, ServerLimits(), info=model_info(tiny_model_dir, translator.translator))
    with serve_in_thread(app) as url:
        yield url


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM  # the Debian build: selenium must not look for (or fetch) another
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium')}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # to read the page's console
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    yield driver
    driver.quit()


def heatmap_titles(browser) -> list[str]:
    """Every cell's tooltip (its pieces and weight), read in one script call rather than one per cell."""
    return browser.execute_script('return Array.from(document.querySelectorAll("#heatmap td.cell"), c => c.title)')


def test_translate_a_sentence_and_see_its_attention(browser, url, translator):
    browser.get(url + "/")
    wait = WebDriverWait(browser, 30)
    wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#beam option"))  # /health answered
    assert "de → en" in browser.find_element(By.ID, "model").text
    Select(browser.find_element(By.ID, "beam")).select_by_value("2")
    browser.find_element(By.ID, "source").send_keys(SENTENCE)
    browser.find_element(By.ID, "translate").click()
    wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#heatmap td.cell"))

    [expected] = translator.translator.translate_detailed([SENTENCE], beam=2, return_attention=True)
    calls = translator.calls
    assert browser.find_element(By.CSS_SELECTOR, "#translations li").text.startswith(expected[0].text)
    # By words, as a reader looks for them: one row per output word, one column per source word, the
    # start and end tokens said plainly, and no subword marker anywhere.
    src_words, tgt_words = expected[0].src_words.labels, expected[0].tgt_words.labels
    cells = len(src_words) * len(tgt_words)
    assert len(heatmap_titles(browser)) == cells  # one cell per (output word, source word)
    source_headers = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#heatmap th.src")]
    assert source_headers == ["(start)", *SENTENCE.split(), "(end)"]
    output_headers = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#heatmap th.tgt")]
    assert output_headers == tgt_words and set(expected[0].text.split()) <= set(output_headers)
    shown = browser.find_element(By.ID, "heatmap").text + " ".join(heatmap_titles(browser))
    assert "▁" not in shown and "[START]" not in shown and "[END]" not in shown
    titles = heatmap_titles(browser)  # each cell titled "word → word: 0.123"
    for row in range(len(tgt_words)):  # each word's row still sums to 1
        weights = [float(t.rsplit(": ", 1)[1]) for t in titles[row * len(src_words) : (row + 1) * len(src_words)]]
        assert sum(weights) == pytest.approx(1, abs=1e-2)

    # Another layer and head: the same table shape, other weights, and no new request.
    mean_of_last_layer = heatmap_titles(browser)
    Select(browser.find_element(By.ID, "layer")).select_by_value("0")
    Select(browser.find_element(By.ID, "head")).select_by_value("1")
    table = browser.find_element(By.CSS_SELECTOR, "#heatmap table")
    assert (table.get_attribute("data-layer"), table.get_attribute("data-head")) == ("0", "1")
    assert len(heatmap_titles(browser)) == cells and heatmap_titles(browser) != mean_of_last_layer
    assert translator.calls == calls

    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, errors


def test_a_refused_request_shows_the_servers_message(browser, url):
    browser.get(url + "/")
    WebDriverWait(browser, 30).until(lambda b: b.find_elements(By.CSS_SELECTOR, "#target-lang option"))
    source = browser.find_element(By.ID, "source")
    browser.execute_script("arguments[0].value = 'x'.repeat(1001)", source)  # over max_chars; typing is slow
    browser.find_element(By.ID, "translate").click()
    status = browser.find_element(By.ID, "status")
    WebDriverWait(browser, 30).until(lambda b: "error" in status.get_attribute("class"))
    assert "422" in status.text and "1000" in status.text
    # the file input takes what the server's /translate_file takes, from its own list
    from nmt.server.libretranslate import FILE_FORMATS

    assert browser.find_element(By.ID, "file").get_attribute("accept") == ",".join(FILE_FORMATS)


def test_a_busy_server_shows_when_to_try_again(browser, url, translator):
    """A full queue (503 + Retry-After) is shown with its message and the wait, not a parse error."""
    browser.get(url + "/")
    WebDriverWait(browser, 30).until(lambda b: b.find_elements(By.CSS_SELECTOR, "#beam option"))
    browser.find_element(By.ID, "source").send_keys(SENTENCE)
    answer = '{"error": "overloaded", "message": "the server is busy"}'
    # Stand in for the server's answer in the page itself: the test needs no overloaded model.
    browser.execute_script(
        "window.fetch = async () => new Response(arguments[0], "
        "{status: 503, headers: {'Retry-After': '7', 'Content-Type': 'application/json'}})",
        answer,
    )
    browser.find_element(By.ID, "translate").click()
    status = browser.find_element(By.ID, "status")
    WebDriverWait(browser, 30).until(lambda b: "error" in status.get_attribute("class"))
    assert status.text == "error 503: the server is busy (try again in 7 s)"


# --- several models, detection, documents, files, keys --------------------------------------------------
@pytest.fixture(scope="module")
def two_models_url(tiny_model_dir):
    """A server with the tiny de->en model first and a stub en->de model that tags its output."""
    from test_server_libretranslate import Tagged

    de_en = Translator.load(tiny_model_dir, device="cpu")
    en_de = Tagged("en-de")
    info = model_info(tiny_model_dir, de_en)
    en_de_info = {**info, "model": "stub", "src_lang": "en", "tgt_lang": "de"}
    app = create_app(de_en, ServerLimits(), info=info, more_models=[(en_de, en_de_info)])
    with serve_in_thread(app) as url:
        yield url


def page_ready(browser, url):
    browser.get(url + "/")
    WebDriverWait(browser, 30).until(lambda b: b.find_elements(By.CSS_SELECTOR, "#target-lang option"))


def test_another_direction_is_picked_and_the_source_language_detected(browser, two_models_url):
    page_ready(browser, two_models_url)
    source = Select(browser.find_element(By.ID, "source-lang"))
    assert [o.get_attribute("value") for o in source.options] == ["auto", "de", "en"]
    assert source.first_selected_option.get_attribute("value") == "de"  # the first model's direction
    source.select_by_value("auto")
    Select(browser.find_element(By.ID, "target-lang")).select_by_value("de")
    browser.find_element(By.ID, "source").send_keys("A man is riding a bicycle.")
    browser.find_element(By.ID, "translate").click()
    WebDriverWait(browser, 30).until(lambda b: b.find_elements(By.CSS_SELECTOR, "#translations li"))
    assert browser.find_element(By.CSS_SELECTOR, "#translations li").text == "A man is riding a bicycle.|en-de"
    assert browser.find_element(By.ID, "detected").text.startswith("detected: en")
    assert "first model's direction" in browser.find_element(By.ID, "heatmap").text


def test_a_multi_target_model_of_unknown_languages_offers_its_targets(browser):
    from test_server_libretranslate import INFO, Tagged

    class IntoTarget(Tagged):  # writes the target it was asked for
        def translate_detailed(self, texts, request, **options):
            return [[Translation(f"{options.get('target_lang')}:{t}", 0.0, 0.0, [], [])] for t in texts]

    info = {**INFO, "src_lang": None, "tgt_lang": None, "target_langs": ["de", "fr"]}  # as nmt import may leave it
    with serve_in_thread(create_app(IntoTarget("xx"), ServerLimits(), info=info)) as url:
        page_ready(browser, url)
        target = Select(browser.find_element(By.ID, "target-lang"))
        assert [o.get_attribute("value") for o in target.options] == ["de", "fr"]
        target.select_by_value("fr")
        browser.find_element(By.ID, "source").send_keys("A man.")
        browser.find_element(By.ID, "translate").click()
        WebDriverWait(browser, 30).until(lambda b: b.find_elements(By.CSS_SELECTOR, "#translations li"))
        assert browser.find_element(By.CSS_SELECTOR, "#translations li").text.startswith("fr:A man.")


def test_a_many_to_one_model_s_directions_go_to_nmt_s_own_api(browser):
    from test_server_libretranslate import INFO, Tagged

    into_english = Tagged("xx-en")  # data.pairs [de-en, fr-en]: one model, no target token
    info = {**INFO, "src_lang": None, "tgt_lang": "en", "directions": [["de", "en"], ["fr", "en"]]}
    with serve_in_thread(create_app(into_english, ServerLimits(), info=info)) as url:
        page_ready(browser, url)
        source = Select(browser.find_element(By.ID, "source-lang"))
        assert [o.get_attribute("value") for o in source.options] == ["auto", "de", "en", "fr"]
        source.select_by_value("fr")
        assert [o.get_attribute("value") for o in Select(browser.find_element(By.ID, "target-lang")).options] == ["en"]
        # what the page sends, to tell nmt's own API ({"text": [...]}) from LibreTranslate's ({"q": ...})
        browser.execute_script(
            "window.sent = []; const send = window.fetch;"
            "window.fetch = (url, init) => { window.sent.push(init && init.body); return send(url, init); };"
        )
        browser.find_element(By.ID, "source").send_keys("Un homme.")
        browser.find_element(By.ID, "translate").click()
        WebDriverWait(browser, 30).until(lambda b: b.find_elements(By.CSS_SELECTOR, "#translations li"))
        assert browser.find_element(By.CSS_SELECTOR, "#translations li").text.startswith("Un homme.|xx-en")
        bodies = [body for body in browser.execute_script("return window.sent") if body and "Un homme" in body]
        assert len(bodies) == 1 and '"text"' in bodies[0] and '"source_lang":"fr"' in bodies[0].replace(" ", "")


def test_a_pasted_document_keeps_its_paragraphs(browser, two_models_url):
    page_ready(browser, two_models_url)
    Select(browser.find_element(By.ID, "source-lang")).select_by_value("en")
    browser.find_element(By.ID, "document").click()
    browser.execute_script("document.getElementById('source').value = arguments[0]", "One here. Two here.\n\nThree.")
    browser.find_element(By.ID, "translate").click()
    output = browser.find_element(By.ID, "document-output")
    WebDriverWait(browser, 30).until(lambda b: output.is_displayed() and output.text)
    assert output.text == "One here.|en-de Two here.|en-de\n\nThree.|en-de"


def test_a_file_is_translated_and_offered_for_download(browser, two_models_url, tmp_path):
    import urllib.request

    document = tmp_path / "letter.txt"
    document.write_text("Hello there.\n\nGoodbye.\n", encoding="utf-8")
    page_ready(browser, two_models_url)
    Select(browser.find_element(By.ID, "source-lang")).select_by_value("en")
    browser.find_element(By.ID, "file").send_keys(str(document))
    browser.find_element(By.ID, "translate-file").click()
    link = browser.find_element(By.ID, "download")
    WebDriverWait(browser, 30).until(lambda b: link.is_displayed())
    with urllib.request.urlopen(link.get_attribute("href"), timeout=30) as answer:
        assert answer.read().decode("utf-8") == "Hello there.|en-de\n\nGoodbye.|en-de\n"


def test_a_server_that_requires_keys_asks_for_one(browser, tiny_model_dir, tmp_path):
    from nmt.server.keys import Admission, ApiKeys

    keys = tmp_path / "keys.txt"
    keys.write_text("page-key-00001\n", encoding="utf-8")
    translator = Translator.load(tiny_model_dir, device="cpu")
    app = create_app(
        translator,
        ServerLimits(),
        info=model_info(tiny_model_dir, translator),
        admission=Admission(ApiKeys.load(keys)),
    )
    with serve_in_thread(app) as url:
        page_ready(browser, url)
        assert browser.find_element(By.ID, "api-key").is_displayed()
        browser.find_element(By.ID, "source").send_keys(SENTENCE)
        browser.find_element(By.ID, "translate").click()
        status = browser.find_element(By.ID, "status")
        WebDriverWait(browser, 30).until(lambda b: "error" in status.get_attribute("class"))
        assert "403" in status.text
        browser.find_element(By.ID, "api-key").send_keys("page-key-00001")
        browser.find_element(By.ID, "translate").click()
        WebDriverWait(browser, 30).until(lambda b: b.find_elements(By.CSS_SELECTOR, "#heatmap td.cell"))


# --- the page as `nmt serve` serves it, on the engine its own --engine auto chooses ---------------------
@pytest.mark.parametrize("engine", ["auto", "torch"])
def test_the_page_works_on_the_engine_nmt_serve_chooses(browser, tiny_model_dir, tmp_path, engine):
    """With ctranslate2 installed, auto serves on CTranslate2, which has no attention and does not
    count parameters: the page still fills its beam list, translates, and says why there is no
    heatmap; on nmt's engine the heatmap is drawn."""
    model_dir = shutil.copytree(tiny_model_dir, tmp_path / "model")  # auto's export is written into it
    with nmt_serve(model_dir, "--engine", engine) as (url, log):
        health = httpx.get(url + "/health", timeout=30).json()
        expected_engine = "ctranslate2" if engine == "auto" and ctranslate2_installed() else "torch"
        assert health["engine"] == expected_engine
        assert health["attention"] is (expected_engine == "torch")
        assert health["parameters"] == Translator.load(tiny_model_dir, device="cpu").parameter_count
        assert not any("None parameters" in line for line in log), log
        browser.get_log("browser")  # what earlier tests left in the shared browser's console
        browser.get(url + "/")
        wait = WebDriverWait(browser, 30)
        wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#beam option"))
        beams = [o.get_attribute("value") for o in Select(browser.find_element(By.ID, "beam")).options]
        assert beams == [str(b) for b in range(1, health["limits"]["max_beam"] + 1)]
        assert f"{health['parameters']:,} parameters" in browser.find_element(By.ID, "model").text
        browser.find_element(By.ID, "source").send_keys(SENTENCE)
        browser.find_element(By.ID, "translate").click()
        wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#translations li"))
        assert browser.find_element(By.ID, "status").text == ""  # no error
        expected = httpx.post(url + "/translate", json={"text": [SENTENCE]}, timeout=30).json()
        assert browser.find_element(By.CSS_SELECTOR, "#translations li").text.startswith(
            expected["translations"][0]["text"]
        )
        cells = heatmap_titles(browser)
        if expected_engine == "torch":
            wait.until(lambda b: heatmap_titles(b))
        else:
            assert not cells and "no attention weights" in browser.find_element(By.ID, "heatmap").text
            assert not browser.find_element(By.ID, "attention-controls").is_displayed()
        errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
        assert not errors, errors


def test_doubtful_words_and_sentences_are_marked_with_their_scores_and_explained(browser, tiny_model_dir, tmp_path):
    import math

    from nmt.quality import fit_calibration, sentence_score

    model_dir = shutil.copytree(tiny_model_dir, tmp_path / "model")
    fit_calibration([float(i) for i in range(10)], [0.0] * 10, fitted_on="x").save(model_dir)  # doubtful below 1.5
    translator = Translator.load(model_dir, device="cpu")
    expected = translator.translate_detailed([SENTENCE], beam=1, scores=True)[0][0]
    words, scores = expected.text.split(" "), expected.word_scores
    assert len(words) == len(scores) and expected.doubtful  # every log-probability is below 1.5
    app = create_app(translator, ServerLimits(), info=model_info(model_dir, translator))
    with serve_in_thread(app) as url:
        browser.get(url + "/")
        wait = WebDriverWait(browser, 30)
        wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#beam option"))
        Select(browser.find_element(By.ID, "beam")).select_by_value("1")
        browser.find_element(By.ID, "source").send_keys(SENTENCE)
        browser.find_element(By.ID, "translate").click()
        wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#translations .word"))
        shown = browser.find_elements(By.CSS_SELECTOR, "#translations .word")
        assert [w.text for w in shown] == words
        marked = [w.text for w in browser.find_elements(By.CSS_SELECTOR, "#translations .word.doubtful")]
        assert marked == [w for w, s in zip(words, scores, strict=True) if s < math.log(0.5)] and marked
        assert [w.get_attribute("title").split("word score ")[1] for w in shown] == [f"{s:.2f})" for s in scores]
        line = browser.find_element(By.CSS_SELECTOR, "#translations li")
        assert "doubtful" in line.get_attribute("class") and line.text.endswith("⚠ check this sentence")
        assert line.get_attribute("title").startswith(f"quality score {sentence_score(scores):.2f}")
        assert "score -" not in line.text  # no bare number beside the line any more
        key = browser.find_element(By.ID, "quality-key").text
        assert "underlined words are ones the model gave less than even odds" in key and "least sure of" in key
