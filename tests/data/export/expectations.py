"""What the export checks share: a call that must raise an error saying something."""


def expect(error_type, fragment, function, *args, **kwargs):
    """Calls function(*args, **kwargs), which must raise error_type with `fragment` in its
    message; prints the message."""
    try:
        function(*args, **kwargs)
    except error_type as error:
        if fragment not in str(error):
            raise AssertionError(f"{error_type.__name__} without '{fragment}': {error}") from None
        print(f"ok: {error_type.__name__}: {error}")
        return
    raise AssertionError(f"no {error_type.__name__} ({fragment})")
