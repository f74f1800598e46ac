"""The backend contract suite: one set of rules, subclassed once per backend."""

import pytest

# The rule modules are not test_*.py files: register them so failures show rewritten asserts.
pytest.register_assert_rewrite(
    *(
        f"{__name__}.{m}"
        for m in (
            "helpers",
            "suite",
            "rules_visibility",
            "rules_ranking",
            "rules_filters",
            "rules_related",
            "rules_property",
            "rules_paging",
        )
    )
)
