# Symlinks the source package's Python files and subpackages into the build-tree package (see
# python/CMakeLists.txt), so edits to the Python sources need no rebuild. A link whose source is
# gone (a module removed or moved into a subpackage) is removed, so the build tree never imports
# a stale module the source no longer has.
file(GLOB _links RELATIVE ${DST} LIST_DIRECTORIES true ${DST}/*)
foreach(f ${_links})
  if(IS_SYMLINK ${DST}/${f} AND NOT EXISTS ${DST}/${f})
    file(REMOVE ${DST}/${f})
  endif()
endforeach()
file(GLOB _entries RELATIVE ${SRC} ${SRC}/*)
foreach(f ${_entries})
  if(f MATCHES "^__pycache__$" OR f MATCHES "\\.so$")
    continue()
  endif()
  if(IS_DIRECTORY ${SRC}/${f} OR f MATCHES "\\.py$" OR f STREQUAL "py.typed")
    if(NOT EXISTS ${DST}/${f})
      file(CREATE_LINK ${SRC}/${f} ${DST}/${f} SYMBOLIC)
    endif()
  endif()
endforeach()
