"""The session's warm start: which zygote a test's processes are forked from, or why they start
as fresh interpreters. The two kinds of zygote, the session forked after collection and a fresh
interpreter that preloads, are :mod:`ddpkit.testing._warm_start`'s story; either is kept until
the session ends, and ended at once when no isolated test was collected. Before each isolated
test:

- a test that asks for a fresh interpreter (``fresh_interpreter=True``, ``--ddpkit-fresh-
  interpreter``, ``ddpkit_fresh_interpreter = true``) gets one;
- a test whose environment differs from the zygote's in a variable a preloaded module read (a
  session fixture exported ``TMPDIR``, say; for the session's own fork, any variable but the
  per-test ones) gets a new zygote, started with its environment;
- a zygote that cannot fork safely (a preloaded module started a thread, initialised CUDA or a
  process group) is replaced by one that leaves that module to each test; one line says so;
- a zygote that cannot start at all sends the session's isolated tests to fresh interpreters,
  with one line saying why. Never a hang.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

from ddpkit.testing._warm_start import fresh_state
from ddpkit.testing._warm_start.preload import Preloaded, is_per_test
from ddpkit.testing._warm_start.zygote import Zygote, ZygoteError

#: What the zygote preloads while the collection runs.
EARLY = ("torch", "torch.distributed", "pytest")

#: How long a test waits for the zygote to preload (torch alone takes seconds on a busy machine).
READY_SECONDS = 120.0
#: Zygotes started for one session before the warm start gives up (a new environment, or a
#: module left out after it made a fork unsafe, each cost one).
MAX_STARTS = 6


def zygote_environment(base: Mapping[str, str]) -> dict[str, str]:
    """What the zygote preloads with: ``base`` and the variables every test process has the same
    value of (so a module that reads them at import sees what a fresh interpreter would)."""
    env = {**base, "PYTHONUNBUFFERED": "1"}
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


def _differs(info: Preloaded, a: Mapping[str, str], b: Mapping[str, str]) -> list[str]:
    """The variables a test's environment ``b`` may not differ in from the zygote's ``a``."""
    keys: Collection[str] = info.reads
    if info.whole_env:
        keys = {k for k in a.keys() | b.keys() if not is_per_test(k)}
    return sorted(k for k in keys if a.get(k) != b.get(k))


class WarmStart:
    """One pytest session's zygote. ``say`` prints one line to the user. ``fork_session``: the
    session will offer to fork itself after collection (no zygote is started early)."""

    def __init__(self, cwd: Path, say: Callable[[str], None], fork_session: bool = False) -> None:
        self.cwd = cwd
        self.say = say
        self.fork_session = fork_session
        self._names: list[str] = []
        self._zygote: Zygote | None = None
        self._starts = 0
        self._off: str | None = None

    def early(self, env: Mapping[str, str]) -> None:
        """Start the zygote with :data:`EARLY` now, if it has not been started (and the session
        will not offer itself)."""
        if self._starts == 0 and not self.fork_session:
            self._names = list(EARLY)
            self._start(env)

    def collected(
        self,
        names: Sequence[str],
        env: Mapping[str, str],
        fork_here: Callable[[], Zygote] | None = None,
    ) -> None:
        """Isolated tests will run: preload ``names`` (what the collection imported) too.
        ``fork_here``: fork the session into the zygote (:class:`ZygoteError`: why it cannot)."""
        self._names = list(dict.fromkeys([*self._names, *names]))
        if self._zygote is None and self._starts == 0 and fork_here is not None:
            try:
                self._zygote = fork_here()
                self._starts += 1
                return
            except (ZygoteError, OSError) as err:
                why = f"{err}{fresh_state.hint(str(err))}"
                self.say(f"ddpkit: the warm start's zygote is a fresh interpreter: {why}.")
        if self._zygote is None:
            if self._off is None:
                self._start(env)
        else:
            self._zygote.extend(names)

    def _start(self, env: Mapping[str, str]) -> None:
        self.close()
        self._starts += 1
        try:
            self._zygote = Zygote.start(self._names, zygote_environment(env), self.cwd)
        except OSError as err:
            self._give_up(f"the warm-start zygote could not start: {err}")

    def _give_up(self, why: str) -> None:
        self.close()
        self._off = why
        self.say(f"ddpkit: isolated tests start in fresh interpreters from here on: {why}.")

    def zygote_for(self, env: Mapping[str, str]) -> Zygote | None:
        """The zygote to fork this test's processes from (None: fresh interpreters). ``env``
        is the environment the test's processes start from."""
        while self._off is None:
            if self._zygote is None:
                if self._starts >= MAX_STARTS:
                    self._give_up(f"{MAX_STARTS} zygotes were started and none could be used")
                    break
                self._start(env)
                continue
            zygote = self._zygote
            try:
                info = zygote.ready(READY_SECONDS)
            except ZygoteError as err:
                self._give_up(str(err))
                break
            if info.hazard is not None:
                self._leave_out(info.hazard, env)
                continue
            if not _differs(info, zygote.env, zygote_environment(env)) and zygote.alive:
                return zygote
            # a preloaded module read a variable this test changes, or the zygote died
            self._start(env)
        return None

    def _leave_out(self, hazard: str, env: Mapping[str, str]) -> None:
        """The zygote cannot fork safely because of what one import did: start one without it."""
        module = hazard.removeprefix("importing ").partition(":")[0]
        root = module.partition(".")[0]
        self._names = [n for n in self._names if n.partition(".")[0] != root]
        self.say(
            f"ddpkit: the warm start leaves {root} to each test: in the zygote, {hazard}, and a "
            f"fork is not safe then{fresh_state.hint(hazard)}."
        )
        self._start(env)

    def close(self) -> None:
        if self._zygote is not None:
            self._zygote.close()
            self._zygote = None
