#!/bin/sh
# Entry point of the tidelog image: run `tidelog serve`, configured by TIDELOG_* variables.
#
#   (no arguments)           tidelog serve
#   --override k=v ...       tidelog serve --override k=v ...   (arguments starting with '-')
#   serve|probe|topics|...   tidelog <that sub-command> ...     (any other tidelog command)
#   anything else            run it as is (e.g. `sh`)
#
# The broker reads TIDELOG_<PROPERTY> variables itself (config/broker.py); this script only
# checks that the log directory is usable, so a bad volume fails with a message that says why.
set -eu

LOG_DIRS="${TIDELOG_LOG_DIRS:-/var/lib/tidelog}"

check_dirs() {
  old_ifs=$IFS
  IFS=,
  for dir in $LOG_DIRS; do
    if ! mkdir -p "$dir" 2>/dev/null || [ ! -w "$dir" ]; then
      echo "tidelog-entrypoint: log directory $dir is not writable by uid $(id -u);" \
           "mount a volume owned by uid $(id -u) (chown $(id -u) on the host) or set TIDELOG_LOG_DIRS" >&2
      exit 1
    fi
  done
  IFS=$old_ifs
}

if [ "$#" -eq 0 ] || [ "${1#-}" != "$1" ]; then
  check_dirs
  exec tidelog serve "$@"
fi

case "$1" in
  serve)
    shift
    check_dirs
    exec tidelog serve "$@"
    ;;
  topics|produce|consume|groups|get-offsets|dump-log|probe|replay)
    exec tidelog "$@"
    ;;
  *)
    exec "$@"
    ;;
esac
