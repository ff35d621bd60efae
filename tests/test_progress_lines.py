"""Off a terminal a long step still shows it is moving: LogLines prints a line at the first update, then at
most one per interval (`train` uses it, so a log shows progress from its first minute)."""

from fmm_fast.core.progress import LogLines, logged_progress_bar


def test_a_hidden_bar_prints_lines_at_the_first_update_and_then_per_interval(capsys):
    bar = logged_progress_bar(5, "train x", unit="step")  # pytest's stderr is not a terminal
    assert isinstance(bar, LogLines) and bar.disable
    bar.every = 3600.0
    for _ in range(5):
        bar.update(1)
    bar.set_postfix(epoch=1)
    bar.close()
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("train x: 1/5 steps")
    often = logged_progress_bar(3, "train y", unit="step", initial=1)
    often.every = 0.0
    often.update(1)
    often.update(1)
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("train y: 3/3 steps")
    assert not isinstance(logged_progress_bar(3, "quiet", quiet=True), LogLines)
