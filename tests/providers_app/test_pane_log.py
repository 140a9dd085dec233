"""Reading pane logs by byte offset: the cursor format, UTF-8 boundaries, fairness between panes."""

from __future__ import annotations

from pathlib import Path

import pytest

from providers_app.pane_log import decode_cursor, encode_cursor, read_logs
from tess_site.errors import InvalidInput

TEXT = "aé✓🎉" * 10


def write(directory: Path, pane: str, data: bytes, *, closed: bool = False) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / f"{pane}.log").open("ab") as log:
        log.write(data)
    if closed:
        (directory / f"{pane}.closed").touch()


def read_everything(directory: Path, limit: int) -> tuple[list[str], str]:
    pieces: list[str] = []
    cursor = ""
    for _ in range(10_000):
        page = read_logs(directory, cursor, limit)
        pieces.extend(chunk.data for chunk in page.chunks)
        cursor = page.next_cursor
        if page.drained:
            return pieces, cursor
    raise AssertionError("the log never drained")


def test_a_cursor_lists_panes_in_id_order_and_round_trips() -> None:
    cursor = encode_cursor({"%10": 5, "%2": 0})

    assert cursor == "%2:0,%10:5"
    assert decode_cursor(cursor) == {"%2": 0, "%10": 5}
    assert decode_cursor("") == decode_cursor(None) == {}


@pytest.mark.parametrize("cursor", ["x", "%a:1", "%1:-1", "%1", "3:4", "%1:1,", "%1:" + "9" * 19, "$1:0", "%1:1:2"])
def test_a_malformed_cursor_is_refused(cursor: str, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput):
        read_logs(tmp_path, cursor, 10)


@pytest.mark.parametrize("limit", [1, 2, 3, 4, 5, 7, 64])
def test_no_chunk_ever_ends_inside_a_character(limit: int, tmp_path: Path) -> None:
    write(tmp_path, "%1", TEXT.encode())

    pieces, cursor = read_everything(tmp_path, limit)

    assert "".join(pieces) == TEXT
    assert all("\ufffd" not in piece for piece in pieces)
    assert all(len(piece.encode()) <= max(limit, 4) for piece in pieces)
    assert cursor == f"%1:{len(TEXT.encode())}"


def test_an_incomplete_character_waits_for_its_last_bytes(tmp_path: Path) -> None:
    check = "✓".encode()
    write(tmp_path, "%1", b"ab" + check[:2])

    first = read_logs(tmp_path, None, 100)
    waiting = read_logs(tmp_path, first.next_cursor, 100)
    write(tmp_path, "%1", check[2:])
    completed = read_logs(tmp_path, first.next_cursor, 100)

    assert [chunk.data for chunk in first.chunks] == ["ab"]
    assert (waiting.chunks, waiting.drained) == ((), False)
    assert [chunk.data for chunk in completed.chunks] == ["✓"]


def test_a_finished_log_gives_up_its_broken_last_bytes(tmp_path: Path) -> None:
    write(tmp_path, "%1", b"ok\xe2", closed=True)

    page = read_logs(tmp_path, None, 100)

    assert [chunk.data for chunk in page.chunks] == ["ok\ufffd"]
    assert (page.drained, page.closed) == (True, True)


def test_busy_panes_share_a_page_and_each_chunk_continues_the_last(tmp_path: Path) -> None:
    write(tmp_path, "%1", b"a" * 1000)
    write(tmp_path, "%7", b"b" * 1000)

    page = read_logs(tmp_path, "%1:10", 100)

    assert [(chunk.source, len(chunk.data)) for chunk in page.chunks] == [("%1", 50), ("%7", 50)]
    assert [chunk.cursor for chunk in page.chunks] == ["%1:10,%7:0", "%1:60,%7:0"]
    assert page.chunks[0].next_cursor == page.chunks[1].cursor
    assert page.next_cursor == page.chunks[1].next_cursor == "%1:60,%7:50"


def test_a_quiet_pane_leaves_its_share_to_a_busy_one(tmp_path: Path) -> None:
    write(tmp_path, "%1", b"a" * 1000)
    write(tmp_path, "%2", b"b" * 5)

    page = read_logs(tmp_path, None, 100)

    assert [(chunk.source, len(chunk.data)) for chunk in page.chunks] == [("%1", 95), ("%2", 5)]


def test_a_session_without_logs_is_an_empty_finished_stream(tmp_path: Path) -> None:
    page = read_logs(tmp_path / "never-piped", None, 100)

    assert (page.chunks, page.next_cursor, page.drained, page.closed) == ((), "", True, True)


def test_other_files_in_the_directory_are_ignored(tmp_path: Path) -> None:
    write(tmp_path, "%1", b"real")
    (tmp_path / "notes.log").write_text("not a pane")
    (tmp_path / "%2.fifo").write_text("not a log")

    page = read_logs(tmp_path, None, 100)

    assert [(chunk.source, chunk.data) for chunk in page.chunks] == [("%1", "real")]


def test_a_limit_below_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput):
        read_logs(tmp_path, None, 0)
