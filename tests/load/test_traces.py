"""traces.load: the four formats from small generated files, prefixes, multi-turn history, bad rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tiny_bpe import tiny_bpe

from pytest_perfgate import traces
from pytest_perfgate.load.traces import TraceError


@pytest.fixture(scope="module")
def tok() -> Any:
    return tiny_bpe(bos=True)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def _jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


SHAREGPT = [
    {"id": "a", "conversations": [{"from": "human", "value": "What is the capital of France?"},
                                  {"from": "gpt", "value": "Paris is the capital of France."},
                                  {"from": "human", "value": "And of Italy?"},
                                  {"from": "gpt", "value": "Rome."}]},
    {"id": "b", "conversations": [{"from": "system", "value": "Be brief."},
                                  {"from": "human", "value": "Solve 3x + 7 = 22."},
                                  {"from": "gpt", "value": "x = 5"}]},
    {"id": "c", "conversations": [{"from": "gpt", "value": "only an answer"}]},
]


def test_sharegpt_multi_turn_history_grows_and_shares_the_prefix(tmp_path: Path, tok: Any) -> None:
    p = _write(tmp_path, "chat.json", json.dumps(SHAREGPT, indent=1))
    tr = traces.load(p, tokenizer=tok)
    assert tr.format == "sharegpt" and tr.skipped == 1  # conversation c has no user turn
    assert [(r.session, r.turn) for r in tr] == [("a", 0), ("a", 1), ("b", 0)]
    first, second = tr[0].prompt, tr[1].prompt
    assert isinstance(first, tuple) and isinstance(second, tuple)
    assert second[: len(first)] == first and len(second) > len(first)  # the history is a real prefix
    assert all(r.prompt_tokens == len(r.prompt) for r in tr)
    assert tr[0].max_tokens == len(tok.encode("Paris is the capital of France.", add_special_tokens=False))
    assert tr[0].arrival is None and tr.duration is None


def test_sharegpt_without_a_tokenizer_sends_chat_messages(tmp_path: Path) -> None:
    tr = traces.load(_write(tmp_path, "chat.json", json.dumps(SHAREGPT)), max_tokens=33)
    r = tr[1]
    assert r.api == "chat" and r.prompt == "And of Italy?" and r.max_tokens == 33
    assert [m["role"] for m in r.extra["messages"]] == ["user", "assistant", "user"]


def test_burstgpt_rows_have_exact_lengths_and_offsets(tmp_path: Path, tok: Any) -> None:
    csv = ("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
           "5,ChatGPT,40,12,52,Conversation log\n"
           "5.5,GPT-4,17,0,17,Conversation log\n"
           "7.25,ChatGPT,64,3,67,API log\n")
    tr = traces.load(_write(tmp_path, "burst.csv", csv), tokenizer=tok)
    assert tr.format == "burstgpt" and tr.skipped == 1 and len(tr) == 2
    assert [r.arrival for r in tr] == [0.0, 2.25] and tr.duration == 2.25
    assert [len(r.prompt) for r in tr] == [40, 64] and [r.max_tokens for r in tr] == [12, 3]
    assert tr[0].prompt != tr[1].prompt[:40]
    assert tr[0].prompt[0] == tr[1].prompt[0] == 1  # BOS first, counted in the length


def test_length_only_prompts_are_unique_and_seeded(tmp_path: Path, tok: Any) -> None:
    rows = "".join(f"{i * 0.5},m,32,4,36,x\n" for i in range(50))
    p = _write(tmp_path, "same.csv", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n" + rows)
    a, b = traces.load(p, tokenizer=tok), traces.load(p, tokenizer=tok)
    assert [r.prompt for r in a] == [r.prompt for r in b]  # the same file and seed: the same prompts
    assert len({r.prompt[:24] for r in a}) == 50  # no two share a prefix-cache block by accident
    assert [r.prompt for r in traces.load(p, tokenizer=tok, seed=1)] != [r.prompt for r in a]


def test_mooncake_equal_hash_ids_share_real_prefixes(tmp_path: Path, tok: Any) -> None:
    rows = [{"timestamp": 1000, "input_length": 40, "output_length": 5, "hash_ids": [1, 2, 3]},
            {"timestamp": 0, "input_length": 30, "output_length": 7, "hash_ids": [1, 2]},
            {"timestamp": 2500, "input_length": 35, "output_length": 4, "hash_ids": [9, 2, 3]},
            {"timestamp": 3000, "input_length": 20, "output_length": 4}]
    tr = traces.load(_write(tmp_path, "mc.jsonl", _jsonl(rows)), tokenizer=tok, block_size=16)
    assert tr.format == "mooncake"
    assert [r.arrival for r in tr] == [0.0, 1.0, 2.5, 3.0]  # sorted by timestamp (ms -> s)
    a, b, c, d = (r.prompt for r in tr)
    assert [len(x) for x in (a, b, c, d)] == [30, 40, 35, 20]
    assert a == b[:30]  # [1, 2] is a prefix of [1, 2, 3]: the same tokens
    assert a[0] == b[0] == c[0] == 1  # BOS first, as the model sees a text prompt
    assert c[1:17] != b[1:17] and c[17:33] == b[17:33]  # block 2 is the same block at the same place


def test_generic_jsonl_prompt_messages_timestamps_sessions(tmp_path: Path, tok: Any) -> None:
    rows = [{"prompt": "Tell me a story.", "max_tokens": 20, "timestamp": 100, "session_id": "s"},
            {"messages": [{"role": "user", "content": "Hi"}], "timestamp": 50},
            {"prompt": "Go on.", "max_tokens": 8, "timestamp": 400, "session_id": "s"}]
    tr = traces.load(_write(tmp_path, "g.jsonl", _jsonl(rows)), tokenizer=tok, max_tokens=11)
    assert tr.format == "jsonl"
    assert [r.arrival for r in tr] == pytest.approx([0.0, 0.05, 0.35])
    assert isinstance(tr[0].prompt, tuple) and tr[0].max_tokens == 11  # messages: the chat template's ids
    assert [(r.session, r.turn) for r in tr[1:]] == [("s", 0), ("s", 1)]


@pytest.mark.parametrize(("name", "text", "fmt", "where", "what"), [
    ("bad.jsonl", '{"prompt": "a"}\n\n{"prompt": 3}\n', None, ":3:", "needs 'prompt'"),
    ("bad.jsonl", '{"prompt": "a", "max_tokens": 0}\n', None, ":1:", "max_tokens must be an integer >= 1"),
    ("bad.jsonl", '{"prompt": "a", "timestamp": 1}\n{"prompt": "b"}\n', None, ":2:", "timestamp missing"),
    ("bad.jsonl", '{"prompt": "a"}\nnot json\n', None, ":2:", "not JSON"),
    ("mc.jsonl", '{"input_length": 10, "output_length": 2}\n{"input_length": 10, "output_length": 2, '
                 '"hash_ids": [1, 2]}\n', None, ":2:", "2 hash ids of 512 tokens cannot make input_length 10"),
    ("mc.jsonl", '{"input_length": -1, "output_length": 2}\n', None, ":1:", "input_length must be"),
    ("b.csv", "Timestamp,Request tokens,Response tokens\n1,10,2\nx,10,2\n", None, ":3:", "Timestamp must be"),
    ("b.csv", "Time,Request tokens\n1,10\n", None, ":1:", "columns missing: Timestamp, Response tokens"),
    ("c.json", '[\n {"id": "a", "conversations": []},\n {"id": "b"}\n]', None, ":3:", "no 'conversations'"),
    ("c.json", '[\n {"conversations": [{"from": "alien", "value": "x"}]}\n]', None, ":2:", "needs 'from'"),
    ("t.txt", "x", None, "t.txt", "cannot tell the trace format"),
    ("t.txt", "x", "csvish", "t.txt", "format 'csvish' unknown"),
])
def test_a_bad_row_names_the_file_and_line(tmp_path: Path, tok: Any, name: str, text: str, fmt: str | None,
                                           where: str, what: str) -> None:
    p = _write(tmp_path, name, text)
    with pytest.raises(TraceError) as e:
        traces.load(p, tokenizer=tok, format=fmt)
    msg = str(e.value)
    assert str(p) in msg or name in msg
    assert where in msg and what in msg, msg


def test_length_only_traces_need_the_tokenizer(tmp_path: Path) -> None:
    p = _write(tmp_path, "b.csv", "Timestamp,Request tokens,Response tokens\n1,10,2\n")
    with pytest.raises(TraceError, match="b.csv: a burstgpt trace gives token counts only.*tokenizer"):
        traces.load(p)
