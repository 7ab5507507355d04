"""Formgrader shows the gradebook as it is now, not as its server last read it.

nbgrader's Formgrader keeps one database session per server for all its requests (its handlers'
`gradebook`, nbgrader/server_extensions/formgrader/base.py). SQLAlchemy keeps the rows a session has
read, so a grade changed by another process (another grader's Formgrader in the course's hub
service, `nbgrader autograde` in a terminal) stays as this server first read it until it saves
something itself: an instructor would see a teaching assistant's hand score as still missing. This
Jupyter server extension, on wherever Formgrader is (course.sh: the instructor's server extensions),
ends that session's transaction at the start of each Formgrader request (a rollback: Formgrader
commits each change it makes within its request), so every request reads what the database holds
then.
"""

from __future__ import annotations

import inspect

from nbgrader.server_extensions.formgrader.base import BaseHandler

_original_prepare = BaseHandler.prepare


async def _prepare(self, *args, **kwargs):
    gradebook = self.settings.get("nbgrader_gradebook")
    if gradebook is not None:
        # forget what this session read: the rows are read again from the database
        gradebook.db.rollback()
    result = _original_prepare(self, *args, **kwargs)
    return await result if inspect.isawaitable(result) else result


def _jupyter_server_extension_points():
    return [{"module": "course_utils.grader.freshgradebook"}]


def _load_jupyter_server_extension(serverapp):
    BaseHandler.prepare = _prepare
