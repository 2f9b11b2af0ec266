"""Hollow shims: names exist, behaviour is borrowed or missing."""

from packaging.version import InvalidVersion as _PkgInvalid  # banned: import_ban "packaging"


class InvalidVersion(_PkgInvalid):
    pass


class InvalidRange(ValueError):
    pass


class Version:
    def __init__(self, text):
        raise NotImplementedError


class Range:
    def __init__(self, text):
        raise NotImplementedError


def compare(a, b):
    raise NotImplementedError


def sort_versions(versions, *, reverse=False):
    raise NotImplementedError


def satisfies(version, range, *, include_prerelease=False):
    raise NotImplementedError


def max_satisfying(versions, range, *, include_prerelease=False):
    return None


def min_satisfying(versions, range, *, include_prerelease=False):
    return None
