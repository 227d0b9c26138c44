# Parameter steps shared by the stochastic solvers (polynomial/_sgd.pyx: SGD and AdaGrad
# passes; ranking/_pairwise.pyx: pairwise ranking).  Modules that call adagrad_step in a
# loop are built with -fno-math-errno, so that its square roots and divisions vectorise.
from libc.math cimport sqrt, sqrtf

from ._kernels cimport floating


cdef inline void adagrad_step(floating* p, floating* acc, floating g,
                              double eta0) noexcept nogil:
    """AdaGrad on one coordinate with gradient g: G += g^2, p -= g eta0 / (sqrt(G) + 1e-8).

    All in the parameter's precision: float32 parameters take the whole step on float32
    lanes (four to an SSE register, no conversions to double and back), float64 ones on
    float64 lanes.
    """
    acc[0] = acc[0] + g * g
    if floating is float:
        p[0] = p[0] - g * (<float> eta0 / (sqrtf(acc[0]) + <float> 1e-8))
    else:
        p[0] = p[0] - g * (eta0 / (sqrt(acc[0]) + 1e-8))
