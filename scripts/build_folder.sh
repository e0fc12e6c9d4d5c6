# Sourced by scripts/bench.sh and scripts/test.sh: the build folder the README's two commands
# share where their options agree (the CUDA backend on or off), so that between them they compile
# the library once: build/main with the CUDA backend, build/main-cpu without it. scripts/test.sh
# adds the C++ tests and the Python package to the folder; scripts/bench.sh builds its one target
# in it, whichever command made it.
shared_build_folder() {
  if [ "$1" = ON ]; then echo build/main; else echo build/main-cpu; fi
}

# Exports CMAKE_GENERATOR for folder $1: the one it was made with (CMake refuses to configure a
# folder with another), else Ninja where it is installed (what pip's build picks; scripts/
# install_deps.sh installs it), so that both commands configure the folder alike.
use_folder_generator() {
  local made
  made=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$1/CMakeCache.txt" 2>/dev/null || true)
  if [ -n "$made" ]; then
    export CMAKE_GENERATOR="$made"
  elif [ -z "${CMAKE_GENERATOR:-}" ] && command -v ninja >/dev/null; then
    export CMAKE_GENERATOR=Ninja
  fi
}
