"""``python -m course_lib …`` is the ``course`` command."""

import sys

from course_lib.workshop.cli import main

sys.exit(main())
