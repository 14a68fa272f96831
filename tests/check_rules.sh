#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The mechanical house rules (docs/HACKING.md):
#   - memory shared without a lock is touched only through
#     src/common/atomics.h: no __atomic_ or __sync_ builtin elsewhere in src/;
#   - commit subjects are at most 72 characters, from RULES_SINCE on (the
#     commit after which every subject kept to it), where the history is
#     there to read.
#
#   usage: check_rules.sh [BUILD_DIR]   (the build folder is not needed)

RULES_SINCE=a9ae658
cd "$(dirname "$0")/.." || exit 1
rc=0

bad=$(grep -rnE '__(atomic|sync)_[a-z]' src --include='*.c' --include='*.h' | grep -v '^src/common/atomics.h:')
if [ -n "$bad" ]; then
	echo "atomics outside src/common/atomics.h:"
	echo "$bad"
	rc=1
fi

if command -v git >/dev/null && git rev-parse -q --verify "$RULES_SINCE^{commit}" >/dev/null 2>&1; then
	long=$(git log --format='%h %s' "$RULES_SINCE..HEAD" | awk '{ s = $0; sub(/^[^ ]* /, "", s); if (length(s) > 72) print }')
	if [ -n "$long" ]; then
		echo "commit subjects over 72 characters:"
		echo "$long"
		rc=1
	fi
else
	echo "no history to read: commit subjects not checked"
fi
[ $rc -eq 0 ] && echo "house rules: kept"
exit $rc
