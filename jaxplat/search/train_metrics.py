"""Metrics a training study ranks by (search.train_study): name -> (field of
cost.training.TrainMetrics or 'derived', better direction, unit), in the
form of search.study.METRICS, which includes them. Names that carry their SI
unit already (step_time_s) keep it as their column name in top_k.csv."""

TRAIN_METRICS = {
    "step_time_s": ("step_time_s", "min", "s"),
    "tokens_per_s_per_chip": ("tokens_per_s_per_chip", "max", "tokens/s/chip"),
    "mfu": ("mfu", "max", ""),
    "hfu": ("hfu", "max", ""),
    "train_time_s": ("train_time_s", "min", "s"),
    "train_cost_usd": ("train_cost_usd", "min", "USD"),
    "train_energy_j": ("train_energy_j", "min", "J"),
    "clock_share": ("clock", "max", ""),  # of the rated clock, under the power limit (energy.clock_share)
}
# Every metric a training study reports (its top_k.csv columns), the shared ones included.
TRAIN_METRIC_NAMES = (*TRAIN_METRICS, "memory_bytes", "memory_fraction", "chips")

__all__ = ["TRAIN_METRICS", "TRAIN_METRIC_NAMES"]
