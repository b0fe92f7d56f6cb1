"""``Config(...)`` reports only bad arguments as ConfigError: a TypeError raised inside
``__post_init__`` (a bug, here a subclass's) propagates as itself."""

from __future__ import annotations

import pytest

from aiden import Config, ConfigError


class _Buggy(Config, frozen=True, kw_only=True):
    def __post_init__(self) -> None:
        super().__post_init__()
        raise TypeError("a bug in __post_init__")


def test_a_type_error_inside_post_init_is_not_reported_as_a_config_error() -> None:
    with pytest.raises(TypeError) as raised:
        _Buggy(context_window=8000)
    assert type(raised.value) is TypeError
    assert str(raised.value) == "a bug in __post_init__"


def test_bad_arguments_are_still_config_errors() -> None:
    with pytest.raises(ConfigError) as unknown:
        Config(context_windw=8000)  # type: ignore[call-arg]
    assert str(unknown.value) == "Config: Unexpected keyword argument 'context_windw'"
    with pytest.raises(ConfigError) as positional:
        Config(8000)  # type: ignore[call-arg]
    assert str(positional.value) == "Config: Extra positional arguments provided"
    # A subclass's unknown argument too, before its __post_init__ could run.
    with pytest.raises(ConfigError) as in_subclass:
        _Buggy(bogus=1)  # type: ignore[call-arg]
    assert str(in_subclass.value) == "Config: Unexpected keyword argument 'bogus'"
