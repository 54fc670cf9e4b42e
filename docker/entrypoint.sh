#!/bin/sh
# Entry point of the tidelog image: run `tidelog serve`, configured by TIDELOG_* variables.
#
#   (no arguments)           tidelog serve
#   --override k=v ...       tidelog serve --override k=v ...   (arguments starting with '-')
#   serve|probe|topics|...   tidelog <that sub-command> ...     (any tidelog command)
#   anything else            run it as is (e.g. `sh`)
#
# The broker reads TIDELOG_<PROPERTY> variables itself (config/broker.py); this script only
# checks that the log directories are usable, so a bad volume fails with a message that says
# why. The directories are the ones `tidelog serve` would use with the same variables and
# arguments (log.dirs, else log.dir; from the environment, --config or --override).
set -eu

# The helper module that answers the questions below (one place to change if it moves).
ENTRYPOINT_HELPER=tidelog.cli.docker_entrypoint

check_dirs() {
  # Only real settings: --help, --version and bad flags print nothing here (serve prints them).
  case " $* " in *" -h "*|*" --help "*|*" --version "*) return 0 ;; esac
  dirs=$(python -m "$ENTRYPOINT_HELPER" log-dirs "$@" 2>/dev/null || true)
  [ -n "$dirs" ] || return 0  # a bad configuration: `tidelog serve` reports it itself
  old_ifs=$IFS
  IFS='
'
  for dir in $dirs; do
    if ! mkdir -p "$dir" 2>/dev/null || [ ! -d "$dir" ] || [ ! -w "$dir" ]; then
      echo "tidelog-entrypoint: log directory $dir is not writable by uid $(id -u);" \
           "mount a volume owned by uid $(id -u) (chown $(id -u) on the host)," \
           "or point TIDELOG_LOG_DIRS (log.dirs) elsewhere" >&2
      exit 1
    fi
  done
  IFS=$old_ifs
}

if [ "$#" -eq 0 ] || [ "${1#-}" != "$1" ]; then
  check_dirs "$@"
  exec tidelog serve "$@"
fi

case "$1" in
  serve)
    shift
    check_dirs "$@"
    exec tidelog serve "$@"
    ;;
esac

# A tidelog sub-command (topics, config-reference, acls ... as tidelog itself lists them) goes
# to tidelog, even when a program of that name exists (coreutils has `groups`); anything else
# runs as is (sh, python ...).
if python -m "$ENTRYPOINT_HELPER" is-command "$1" 2>/dev/null; then
  exec tidelog "$@"
fi
exec "$@"
