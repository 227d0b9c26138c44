"""Progress of a fit on stderr: a tqdm bar on a terminal, one line per epoch otherwise,
reporting the scores the summary line reports (RMSE for a regressor, accuracy for a
classifier, AUC for a ranker)."""
import contextlib
import sys

import numpy as np

from ._models import is_field_aware, is_ranker


class Progress:
    """Progress of the epochs on stderr, as ``--progress`` and ``--quiet`` choose."""

    def __init__(self, args, stream=None):
        self.stream = sys.stderr if stream is None else stream
        mode = "none" if args.quiet else args.progress
        if mode == "auto":
            mode = "bar" if self.stream.isatty() else "lines"
        if mode == "bar":
            import importlib.util
            if importlib.util.find_spec("tqdm") is None:  # pragma: no cover - a dependency
                mode = "lines"
        self.mode = mode
        self.bar = None
        self.bar_key = None

    def epoch(self, output, n_outputs, epoch, max_iter, values, seconds, unit="epoch"):
        """Report an epoch; ``values`` maps names to numbers (NaN ones are left out).
        A pass of --stream (``unit="pass"``) is a line in both modes, its bar being one
        over the bytes of the pass."""
        shown = {name: value for name, value in values.items() if np.isfinite(value)}
        if self.mode == "lines" or (self.mode == "bar" and unit == "pass"):
            self.close()
            prefix = f"[output {output + 1}/{n_outputs}] " if n_outputs > 1 else ""
            text = "".join(f"  {name} {value:.6g}" for name, value in shown.items())
            print(f"{prefix}{unit} {epoch}/{max_iter}{text}  {seconds:.1f}s",
                  file=self.stream, flush=True)
        elif self.mode == "bar":
            bar = self._bar((output, n_outputs), max_iter,
                            f"output {output + 1}/{n_outputs}" if n_outputs > 1 else "fit",
                            unit)
            bar.update(epoch - bar.n)
            bar.set_postfix({name: f"{value:.4g}" for name, value in shown.items()},
                            refresh=True)

    def bytes_read(self, key, total, label, n_bytes, unit="B"):
        """Advance a bar over one pass of --stream (bar mode only), by its bytes of text
        or, with ``unit`` "rows", its rows."""
        if self.mode == "bar":
            self._bar(key, total, label, unit).update(n_bytes)

    def _bar(self, key, total, label, unit):
        from tqdm import tqdm
        if self.bar_key != key:
            self.close()
            self.bar = tqdm(total=total, desc=label, unit=unit, file=self.stream,
                            leave=False, dynamic_ncols=True,
                            unit_scale=unit == "B", unit_divisor=1024)
            self.bar_key = key
        return self.bar

    def close(self):
        if self.bar is not None:
            self.bar.close()
            self.bar = self.bar_key = None

    @contextlib.contextmanager
    def watching(self, family, estimator):
        """Report the fit of ``estimator`` (of ``family``, a ``_models.Family``) while in
        the block: its progress hook, and what the hook needs, set on it meanwhile."""
        hooks = (self._sweep_hooks(estimator) if family.unit == "sweep"
                 else self._iteration_hooks() if family.unit == "iteration"
                 else self._epoch_hooks(estimator))
        for name, hook in hooks.items():
            setattr(estimator, name, hook)
        try:
            yield
        finally:
            for name in hooks:
                vars(estimator).pop(name, None)

    def _sweep_hooks(self, estimator):
        """A Gibbs sampler reports the score of its averaged prediction itself."""
        name = f"validation {estimator._score_name.lower()}"

        def report_sweep(sweep, n_sweeps, score, seconds):
            self.epoch(0, 1, sweep, n_sweeps, {name: score}, seconds, unit="sweep")
        return {"_sweep_callback": report_sweep}

    def _iteration_hooks(self):
        """Variational inference reports its evidence lower bound per row."""
        def report_iteration(iteration, max_iter, elbo, seconds):
            self.epoch(0, 1, iteration, max_iter, {"ELBO per row": elbo}, seconds,
                       unit="iteration")
        return {"_iteration_callback": report_iteration}

    def _epoch_hooks(self, estimator):
        """The epoch loop reports the validation loss (a ranker's is its AUC, a
        regressor's half the mean squared error, whose RMSE follows) and a classifier's
        validation accuracy."""
        if is_ranker(estimator):
            def score(report):
                return {"validation AUC": report.validation_loss}
        elif not estimator._is_classifier:
            def score(report):
                return {"validation rmse": np.sqrt(2 * report.validation_loss)}
        elif not (is_field_aware(estimator) and estimator.loss == "logistic"):
            def score(report):
                if report.n_outputs == 1:
                    return {"validation accuracy": report.validation_accuracy}
                label = estimator.classes_[report.output]
                return {f"validation accuracy ({label} vs rest)":
                        report.validation_accuracy}
        else:  # a field-aware classifier: libffm's score, the log-loss, too
            def score(report):
                if report.n_outputs == 1:
                    return {"validation log-loss": report.validation_loss,
                            "validation accuracy": report.validation_accuracy}
                label = estimator.classes_[report.output]
                return {f"validation accuracy ({label} vs rest)":
                        report.validation_accuracy}

        def report(r):
            self.epoch(r.output, r.n_outputs, r.epoch, r.max_iter,
                       {"objective": r.objective, **score(r)}, r.seconds)
        return {"_epoch_callback": report}
