"""The host allocator's settings (gpu_hamlet/engine/host_memory.py): applied once per process,
only where glibc is, and never when GPU_HAMLET_KEEP_FREED_MEMORY=0."""

from __future__ import annotations

import platform

import pytest

from gpu_hamlet.engine import host_memory

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


class FakeLibc:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return 1


@pytest.fixture
def libc(monkeypatch: pytest.MonkeyPatch) -> FakeLibc:
    fake = FakeLibc()
    monkeypatch.setattr(host_memory.ctypes, "CDLL", lambda name: fake)
    monkeypatch.setattr(host_memory, "_applied", None)
    monkeypatch.delenv("GPU_HAMLET_KEEP_FREED_MEMORY", raising=False)
    return fake


def test_settings_applied_once_per_process(libc: FakeLibc) -> None:
    assert host_memory.keep_freed_memory() is GLIBC
    assert host_memory.keep_freed_memory() is GLIBC
    expected = [
        (host_memory.M_MMAP_THRESHOLD, host_memory.MMAP_THRESHOLD),
        (host_memory.M_TRIM_THRESHOLD, host_memory.TRIM_THRESHOLD),
    ]
    assert libc.calls == (expected if GLIBC else [])


def test_opt_out_keeps_the_c_librarys_defaults(
    libc: FakeLibc, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPU_HAMLET_KEEP_FREED_MEMORY", "0")
    assert host_memory.keep_freed_memory() is False
    assert libc.calls == []


def test_a_refused_setting_is_reported(libc: FakeLibc, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(libc, "mallopt", lambda param, value: 0)
    assert host_memory.keep_freed_memory() is False


@pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's")
def test_glibc_takes_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real call: glibc accepts both values (it refuses an mmap threshold it cannot use)."""
    monkeypatch.setattr(host_memory, "_applied", None)
    monkeypatch.delenv("GPU_HAMLET_KEEP_FREED_MEMORY", raising=False)
    assert host_memory.keep_freed_memory() is True
