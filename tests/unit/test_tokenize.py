import re
from concurrent.futures import ThreadPoolExecutor
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from ragloom.index import tokenize
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
        assert len(tok) >= 2 or tokenize._CJK.fullmatch(tok)
        assert " " not in tok


def test_words_of_other_scripts() -> None:
    """``code-v2``: letters of any script make words (``code-v1`` kept ASCII letters only: a
    Cyrillic identifier gave no token, ``größe`` gave ``gr``)."""
    assert code_tokens("def расчёт_налога(сумма): pass") == [
        "def", "расчёт_налога", "расчёт", "налога", "сумма", "pass"]  # fmt: skip
    assert code_tokens("größe = maxGröße") == ["größe", "maxgröße", "max", "größe"]
    assert code_tokens("ПриветМир") == ["приветмир", "привет", "мир"]
    assert code_tokens("café.naïve_x") == ["café.naïve_x", "café", "naïve_x", "naïve"]
    # CJK runs: the whole word and its overlapping pairs; a lone character is a token
    assert code_tokens("税額計算 関数 x = 税") == ["税額計算", "税額", "額計", "計算", "関数", "税"]
    assert code_tokens("计算税额") == ["计算税额", "计算", "算税", "税额"]
    assert code_tokens("関数_計算") == ["関数_計算", "関数", "計算"]  # each part once
    # the question's identifier expansion splits them the same way (it gave "gr e pr fen")
    from ragloom.index.tokenize import split_identifier

    assert split_identifier("größe_prüfen") == ["größe", "prüfen"]
    assert split_identifier("maxGröße") == ["max", "größe"]


# -- the memoised tokenizer against the plain one it replaced ------------------------------

_REF_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*|[0-9]+")
_REF_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def _ref_split(identifier: str) -> list[str]:
    parts: list[str] = []
    for piece in identifier.split("_"):
        if not piece:
            continue
        merged: list[str] = []
        for s in _REF_CAMEL.findall(piece):
            if s.isdigit() and merged:
                merged[-1] += s
            else:
                merged.append(s)
        parts.extend(m.lower() for m in merged)
    return parts


def _ref_keep(token: str) -> bool:
    if len(token) < 2 or len(token) > 64:
        return False
    return not (token.isdigit() and len(token) > 4)


def _reference_tokens(text: str) -> list[str]:
    """``code_tokens`` as it was before the word memo (tokenizer ``code-v1``), verbatim."""
    out: list[str] = []
    for match in _REF_WORD.finditer(text):
        word = match.group(0)
        lowered = word.lower()
        if "." in word:
            if _ref_keep(lowered):
                out.append(lowered)
            components = word.split(".")
        else:
            components = [word]
        for comp in components:
            low = comp.lower()
            if _ref_keep(low):
                out.append(low)
            parts = _ref_split(comp)
            if len(parts) > 1:
                out.extend(p for p in parts if _ref_keep(p))
    return out


_PIECES = st.sampled_from(
    [
        "get", "HTTP", "Response", "JSONDecoder", "parseJSON2", "x", "X", "v2", "_", "__", ".",
        "..", "0", "42", "12345", "007", "a1b2", "ß", "é", "İ", "\u212a", "日本", " ", "\n",
        "/", "-", "(", "snake_case", "ABCdef", "aB" * 40, "q" * 70, "Z" * 130,
    ]
)  # fmt: skip
_IDENTIFIERISH = st.lists(_PIECES, max_size=40).map("".join)
_LONG = st.text(alphabet="aBz_Q.09 ", min_size=50, max_size=600)
_TEXTS = st.one_of(st.text(max_size=300), _IDENTIFIERISH, _LONG).map(
    lambda t: t.encode("ascii", "ignore").decode()
)
"""ASCII texts: the reference is ``code-v1``, whose tokens ``code-v2`` keeps for ASCII text (a
letter of another script joins the word it touches since ``code-v2``)."""


@settings(max_examples=400, deadline=None)
@given(_TEXTS)
def test_code_tokens_equal_the_reference(text: str) -> None:
    want = _reference_tokens(text)
    assert code_tokens(text) == want
    assert code_tokens(text) == want  # the second time from the memo


@settings(max_examples=100, deadline=None)
@given(st.lists(_TEXTS, max_size=8))
def test_a_full_memo_is_emptied_and_gives_the_same_tokens(texts: list[str]) -> None:
    with patch.object(tokenize, "_MEMO_WORDS", 3):
        tokenize._MEMO.clear()
        for text in texts + texts:
            assert code_tokens(text) == _reference_tokens(text)
            assert len(tokenize._MEMO) <= 3
            assert all(len(w) <= tokenize._MEMO_MAX_WORD for w in tokenize._MEMO)
    tokenize._MEMO.clear()


def test_long_words_are_not_memoised() -> None:
    word = "get_http_" * 30
    assert code_tokens(word) == _reference_tokens(word) == ["get", "http"] * 30
    assert word not in tokenize._MEMO


def test_threads_share_the_memo() -> None:
    texts = [
        f"def get{i}Value(self, http_{i % 7}): return json.decoder.JSONDecoder" for i in range(400)
    ]
    want = [_reference_tokens(t) for t in texts]
    with patch.object(tokenize, "_MEMO_WORDS", 50), ThreadPoolExecutor(4) as pool:
        tokenize._MEMO.clear()
        got = list(pool.map(code_tokens, texts * 4))
    assert got == want * 4
