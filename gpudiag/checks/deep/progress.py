"""How the deep run tells about itself as it goes: a terminal shows it (gpudiag.render.deep_progress);
by default nothing is said."""

from __future__ import annotations


class Progress:
    def phase(self, name: str, total: float | None = None) -> None:
        """A phase begins; ``total`` is its length in whatever units :meth:`update` counts."""

    def update(self, completed: float, detail: str = "") -> None:
        """How far the phase is."""

    def done(self) -> None:
        """The deep run is over (called once at its end, and harmless again)."""
