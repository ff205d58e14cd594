"""autoparser as SGLang's function-call and reasoning parser, both named ``autoparser``:
``--tool-call-parser autoparser --reasoning-parser autoparser``, registered by the
``sglang.srt.plugins`` entry point (``detectors.register``, which SGLang runs before it reads
its arguments). Loading the entry point outside the tested range fails with an
IntegrationError naming it, which SGLang logs; its server goes on without the plug-in.
"""

from __future__ import annotations

NAME = "autoparser"
# The SGLang releases the plug-in's tests ran against (tests/integrations/sglang/).
TESTED_MIN, TESTED_BELOW = (0, 5), (0, 6)
TESTED_RANGE = ">=0.5,<0.6"
ANY_VERSION_ENV = "AUTOPARSER_SGLANG_ANY_VERSION"
