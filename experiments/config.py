"""Composing the root config outside a Hydra run (validation, sweep expansion, the figure
registry, plots, tests). A module of its own below :mod:`experiments.run` and
:mod:`experiments.figures`: both need it, and the runner also needs the registry, so with
``compose`` in the runner the two modules imported each other."""

from __future__ import annotations

from omegaconf import DictConfig

from experiments import schema  # noqa: F401  (registers the structured configs)
from experiments.figure_keys import check_figure_keys
from experiments.figure_spec import at_scale, plain, with_seed_replicates
from runtime.paths import CONF


def compose(overrides: list[str]) -> DictConfig:
    """Compose the root config outside a Hydra run (validation, sweep expansion, tests)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    # Inside a Hydra run (a sweep's point looking up other figures, experiments.point_cache)
    # the running Hydra is set aside for the composition and put back after it.
    running = GlobalHydra.instance().hydra
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            cfg = hydra_compose("config", overrides=overrides)
    finally:
        GlobalHydra.instance().hydra = running
    # a misspelt key in a free-form block fails here (the seed replicates' settings too)
    check_figure_keys(with_seed_replicates(plain(cfg.figure)))
    return cfg


def figure_of(cfg: DictConfig) -> dict:
    """The composed figure as plain data, as it runs at the composed scale (its seed
    replicates declared as series: :func:`experiments.figure_spec.with_seed_replicates`; a
    derived scale's sizes filled in: :func:`experiments.figure_spec.at_scale`)."""
    return at_scale(with_seed_replicates(plain(cfg.figure)), cfg.scale.name)
