"""A check on a page's source text that the content tests share."""


def assert_says(text, present=(), absent=()):
    """Every phrase of present is in text, and none of absent is.

    A failure names each phrase that is missing or should not be there.
    """
    missing = [phrase for phrase in present if phrase not in text]
    unwanted = [phrase for phrase in absent if phrase in text]
    assert not missing, f"missing from the page: {missing}"
    assert not unwanted, f"should not be on the page: {unwanted}"
