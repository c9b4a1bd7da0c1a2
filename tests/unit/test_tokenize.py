from hypothesis import given
from hypothesis import strategies as st

from ragloom.index.tokenize import code_tokens, split_identifier


def test_split_identifier_cases() -> None:
    assert split_identifier("parseHTTPHeader") == ["parse", "http", "header"]
    assert split_identifier("snake_case_name") == ["snake", "case", "name"]
    assert split_identifier("getV2Value") == ["get", "v2", "value"]
    assert split_identifier("__init__") == ["init"]
    assert split_identifier("JSONDecoder") == ["json", "decoder"]


def test_code_tokens_keep_whole_and_parts() -> None:
    toks = code_tokens("def parseHeader(raw_value): return json.decoder.JSONDecoder")
    for t in ["parseheader", "parse", "header", "raw_value", "raw", "value"]:
        assert t in toks
    assert "json.decoder.jsondecoder" in toks
    assert "jsondecoder" in toks and "decoder" in toks


def test_paths_split() -> None:
    toks = code_tokens("src/ragloom/index/bm25.py")
    assert {"src", "ragloom", "index", "bm25.py", "bm25", "py"} <= set(toks)


def test_query_of_only_punctuation_is_empty() -> None:
    assert code_tokens("?? !! -- ()") == []
    assert code_tokens("") == []


@given(st.text())
def test_tokens_are_lowercase_and_nonempty(text: str) -> None:
    for tok in code_tokens(text):
        assert tok == tok.lower()
        assert len(tok) >= 2
        assert " " not in tok
