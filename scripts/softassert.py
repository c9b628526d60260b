"""Soft asserts for notebooks run with a step cap (``COURSE_SMOKE_STEPS``): after a few
training steps no model has learned, so the notebooks' quality asserts cannot hold. This
IPython code, run in the kernel first (a prepended cell, or an IPython startup file),
turns every ``assert`` into a check that is recorded in ``_smoke_failed_asserts`` instead
of raised. Anything else that raises still fails. Used by tests/test_full_profile_smoke.py,
the browser test (tests/browser.py) and scripts/device_check.py; the real asserts are checked by nbval.
"""

SOFT_ASSERTS = '''
import ast as _ast
_smoke_failed_asserts = []

def _smoke_check(ok, message, line):
    if not ok:
        _smoke_failed_asserts.append(f"line {line}: {message}")

class _SoftAsserts(_ast.NodeTransformer):
    def visit_Assert(self, node):
        call = _ast.Call(func=_ast.Name("_smoke_check", _ast.Load()),
                         args=[node.test, node.msg or _ast.Constant(_ast.unparse(node.test)),
                               _ast.Constant(node.lineno)], keywords=[])
        return _ast.copy_location(_ast.Expr(call), node)

get_ipython().ast_transformers.append(_SoftAsserts())
'''
