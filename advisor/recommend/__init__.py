"""Candidates for a job, their predicted run, wait and cost, and the choice among them."""
