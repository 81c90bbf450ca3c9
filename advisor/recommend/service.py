"""A recommendation for one submission, as a pipeline of named stages, each a function of what the one
before found:

1. `screen` (`screen.py`): the policy resolved for the caller; a job passed through (the policy off, no
   model described, a spread that is not one answer, a partition not the cluster's), else the partitions
   its candidates may use (open, not refused by placement);
2. `estimate` (`estimate.py`): each candidate's predicted run, time limit, wait and cost, at the level the
   caller's history sets;
3. `choose` (`choose.py`): the ranking by the policy's objective, and whether the winner is worth the
   change; `partition_order` and `advice_for` (`advice.py`): the change in the user's own form;
4. `explain` (`explain.py`): the reasons, worded there only.

The edges come in through `Context` (the policy, the cluster's partitions and a wait estimator) and a
`StepPredictor` for the job (`advisor.recommend.estimator`); the submission, its caller and the clock come in
an `Ask` (`advisor.recommend.ask`). The daemon's predictor reads the store's models and the job's layer
table; an evaluation plugs in measured step times at the same seam.
"""

from __future__ import annotations

from advisor.jobscript.request import JobRequest
from advisor.jobscript.rewrite import Advice
from advisor.recommend.advice import advice_for, partition_order
from advisor.recommend.ask import Ask
from advisor.recommend.choose import Criteria, Decision, Recommendation, choose
from advisor.recommend.estimate import estimate
from advisor.recommend.estimator import Context, StepPredictor
from advisor.recommend.explain import explain, passed
from advisor.recommend.kills import Run, kill_warnings
from advisor.recommend.screen import PassedThrough, screen
from advisor.slurm.models import Partition


def recommend(context: Context, ask: Ask, predictor: StepPredictor | None) -> Recommendation:
    """``predictor``: None where the job describes no model or its model was not read (``ask.unread``)."""
    screened = screen(context, ask, predictor)
    if isinstance(screened, PassedThrough):
        return _passed(screened, ask, context.policy.cost_unit)
    estimated = estimate(context, screened, ask)
    if isinstance(estimated, PassedThrough):
        return _passed(estimated, ask, context.policy.cost_unit)
    effective = screened.effective
    estimates = estimated.estimates
    decision = choose(estimates, estimates[0], Criteria.of(effective))
    allowed = {offer.name: offer for offer in screened.allowed}
    order = partition_order(decision, ask.request, estimated.runs_on, allowed)
    advice = advice_for(decision, ask.request, screened.offers, order)
    return Recommendation(
        user=ask.caller.user,
        account=ask.caller.account,
        mode=effective.mode,
        candidates=decision.ranked,
        baseline=decision.baseline,
        chosen=decision.chosen,
        apply=decision.apply,
        advice=advice,
        reasons=explain(ask, screened, estimated, decision, order),
        cost_unit=context.policy.cost_unit,
        kill_warnings=_kill_warnings(decision, advice, ask.request, screened.written),
    )


def _passed(outcome: PassedThrough, ask: Ask, cost_unit: str) -> Recommendation:
    """No candidates: the job as it is, or with the one change history advises."""
    history = outcome.history
    return Recommendation(
        user=ask.caller.user,
        account=ask.caller.account,
        mode=outcome.effective.mode,
        candidates=[],
        baseline=None,
        chosen=None,
        apply=history is not None and history.apply,
        advice=None if history is None else history.advice,
        reasons=passed(outcome, ask),
        cost_unit=cost_unit,
    )


def _kill_warnings(
    decision: Decision, advice: Advice | None, request: JobRequest, written: Partition
) -> list[str]:
    """The job as submitted (its own limit, else the partition's default or maximum), and as advised."""
    written_limit = request.time_limit or written.default_time or written.max_time
    runs = [Run("as submitted", decision.baseline.run_p90_s, written_limit)]
    if advice is not None:
        runs.append(Run("as advised", decision.chosen.run_p90_s, advice.time_limit or written_limit))
    return kill_warnings(runs)
