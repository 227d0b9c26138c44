"""libFM's MCMC sampler on relation blocks, run as a peer by ``bench_relational.py`` and
``bench_bayes_movielens.py`` (libFM built with ``make`` from its sources)."""
import os
import subprocess

import numpy as np


class LibFM:
    """libFM's MCMC on relation blocks: the user and item tables written once (its own
    convert and transpose tools make the binary .x and .xt files), the ratings' files
    without features."""

    def __init__(self, binary, ml, folder):
        self.binary, self.folder = binary, folder
        tools = os.path.dirname(binary)
        X, X_test = ml["relational"]
        y, y_test = ml["y"]
        start = 0
        for name, block, test_block in zip(("user", "item"), X.blocks, X_test.blocks):
            table = block.table
            base = os.path.join(folder, name)
            with open(base + ".libfm", "w") as out:
                for r in range(table.shape[0]):
                    row = table[r]
                    out.write("0 " + " ".join(f"{j}:{v:.9g}" for j, v in
                                              zip(row.indices, row.data)) + "\n")
            subprocess.run([os.path.join(tools, "convert"), "--ifile", base + ".libfm",
                            "--ofilex", base + ".x", "--ofiley", base + ".y"], check=True,
                           capture_output=True)
            subprocess.run([os.path.join(tools, "transpose"), "--ifile", base + ".x",
                            "--ofile", base + ".xt"], check=True, capture_output=True)
            np.savetxt(base + ".train", block.index, fmt="%d")
            np.savetxt(base + ".test", test_block.index, fmt="%d")
            # One group per field, numbered within the block.
            groups = ml["fields"][start:start + table.shape[1]]
            np.savetxt(base + ".groups", groups - groups.min(), fmt="%d")
            start += table.shape[1]
        for name, target in (("train", y), ("test", y_test)):
            np.savetxt(os.path.join(folder, name + ".libfm"), target, fmt="%g")
        self.y_test = y_test

    def run(self, sweeps, degree_dims="1,1,10", seed=0, log=False):
        """libFM's test predictions after ``sweeps`` sweeps; with ``log``, also the test
        RMSE of its prediction after each sweep (its log's ``rmse_mcmc_all``)."""
        out = os.path.join(self.folder, "predictions.txt")
        f = lambda name: os.path.join(self.folder, name)  # noqa: E731
        subprocess.run([self.binary, "-task", "r", "-method", "mcmc", "-dim", degree_dims,
                        "-iter", str(sweeps), "-init_stdev", "0.1",
                        # libFM seeds C's rand, to which seeds 0 and 1 are the same.
                        "-seed", str(seed + 1),
                        "-train", f("train.libfm"), "-test", f("test.libfm"),
                        "-relation", f"{f('user')},{f('item')}", "-out", out,
                        *(["-rlog", f("log.txt")] if log else [])],
                       check=True, capture_output=True)
        predictions = np.loadtxt(out)
        if not log:
            return predictions
        with open(f("log.txt")) as lines:
            names = lines.readline().split("\t")
            column = names.index("rmse_mcmc_all")
            curve = np.array([float(line.split("\t")[column]) for line in lines])
        return predictions, curve
