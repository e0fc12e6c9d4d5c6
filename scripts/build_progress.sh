# Sourced by scripts/bench.sh and scripts/test.sh. build_progress reads a CMake build's output
# (Ninja or Makefiles, also through pip -v) and prints one line per compiled file or linked
# target ("  [12/57] compiling src/core/communicator.cpp"), so a build of minutes shows what it
# is doing; the caller tees the full output to its log.
build_progress() {
  sed -u -n -E \
    -e 's#^ *\[ *([0-9]+%|[0-9]+/[0-9]+)\] Building [A-Z]+ object (.*)CMakeFiles/[^/]+\.dir/(.*)\.o$#  [\1] compiling \2\3#p' \
    -e 's#^ *\[ *([0-9]+%|[0-9]+/[0-9]+)\] Linking [A-Z]+ [a-z ]+ (.*)$#  [\1] linking \2#p'
}
