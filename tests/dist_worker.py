"""Run once per rank by tests/training/test_distributed.py (RANK/WORLD_SIZE/MASTER_* set by the test, or by
torchrun): trains a few updates and dumps what this rank holds, so the test can compare ranks.

usage: dist_worker.py <dump_dir> <mode: normal|crash> <max_updates> key=value ...
"""

import os

import torch

from ppo_control.config import compose
from ppo_control.config.errors import run_cli
from ppo_control.training.trainer import Trainer


def main(argv):
    dump_dir, mode, max_updates, *overrides = argv
    trainer = Trainer(compose(overrides))
    rank = trainer.dist.rank
    observed = []
    collect = trainer.collector.collect

    def recording_collect():
        if mode == "crash" and rank == 1 and trainer.progress.update == 2:
            os._exit(3)  # a rank dies without a word, mid-run
        rollout = collect()
        observed.append(rollout.storage.observations.reshape(-1, trainer.info.obs_dim).clone())
        return rollout

    trainer.collector.collect = recording_collect
    trainer.train(max_updates=int(max_updates))
    torch.save({"policy": trainer.policy.state_dict(), "observed": torch.cat(observed)}, os.path.join(dump_dir, f"rank{rank}.pt"))


if __name__ == "__main__":
    run_cli(main)
