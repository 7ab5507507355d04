"""nbgrader's exchange for a class on JupyterHub: `bash course.sh hub` names PrivateSubmit in every
user's nbgrader configuration (hub/classroom.py, write_shared_config).

nbgrader's own submit leaves a submission readable, even writable, by every user of the machine
(files 0644 in a folder 0777), hidden only by its name's timestamp and random string. PrivateSubmit
submits the same way, then closes the submission to everyone but its learner and the members of its
files' group: the learner's own group or the instructor's (the inbound folder is the instructor's and
set-group-id, but copying the learner's folder clears that bit on the submission's folder, so
files written after the copy take the learner's group). On the hub each of these groups holds its
account and the instructor only (classroom.check_own_group, join_groups), so `nbgrader collect`
reads the submission and other learners get "Permission denied", even with the exact path.
"""

import os

from nbgrader.exchange.default.submit import ExchangeSubmit

FILE_MODE = 0o640     # the learner writes, the group (the instructor) reads
FOLDER_MODE = 0o770   # and the instructor may delete it, as nbgrader's 0777 let every user


class PrivateSubmit(ExchangeSubmit):
    """nbgrader's ExchangeSubmit, its submission closed to everyone but its learner and the instructor."""

    def copy_files(self):
        super().copy_files()
        self.set_perms(os.path.join(self.inbound_path, self.assignment_filename),
                       fileperms=FILE_MODE, dirperms=FOLDER_MODE)
