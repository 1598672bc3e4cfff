"""The suggest property test (tests/planner/test_advise.py draws the requests): a file of its own, so that the suite's
two longest property tests, suggest's and check's, run on different pytest workers."""

from hypothesis import HealthCheck, given, settings

from planner import advise
from tests.planner.test_advise import EXAMPLES, _answer, reach_both_answers, suggest_requests

OUTCOMES: dict[str, int] = {}


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(suggest_requests)
def test_suggest_answers_every_request_or_names_the_bad_field(data):
    outcome = _answer(advise.SuggestRequest, advise.suggest, data)
    OUTCOMES[f"suggest {outcome}"] = OUTCOMES.get(f"suggest {outcome}", 0) + 1


def test_the_generated_suggest_requests_reach_both_answers():
    """The property test above is not vacuous: both kinds of answer occurred (run after it)."""
    reach_both_answers(OUTCOMES, "suggest")
