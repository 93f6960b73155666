# SPDX-License-Identifier: Apache-2.0

# Hardened, reproducible build flags for every target, on by default (the
# flags Debian's dpkg-buildflags would add, so a plain `cmake` build ships
# the same protections as the package). Included by the top-level
# CMakeLists.txt before any target.
include(CheckCCompilerFlag)
include(CheckPIESupported)

option(RKNP_HARDENING "Stack protector, CET, FORTIFY, RELRO/now, PIE" ON)

# Executables are PIE (the library is PIC anyway): CMP0083 turns
# POSITION_INDEPENDENT_CODE into -pie at link time once this check ran.
check_pie_supported()
set(CMAKE_POSITION_INDEPENDENT_CODE ON)

# Reproducible: no build directory in debug info, __FILE__ or assertions.
add_compile_options(-ffile-prefix-map=${PROJECT_SOURCE_DIR}=.)

if(NOT RKNP_HARDENING)
  return()
endif()

foreach(_flag -fstack-protector-strong -fstack-clash-protection -fcf-protection)
  string(MAKE_C_IDENTIFIER "RKNP_HAS${_flag}" _var)
  check_c_compiler_flag(${_flag} ${_var})
  if(${_var})
    add_compile_options(${_flag})
  endif()
endforeach()
add_link_options(LINKER:-z,relro LINKER:-z,now)

# FORTIFY needs optimisation (glibc warns at -O0, an error under -Werror),
# is already set by dpkg-buildflags in package builds (a second definition
# would warn), and hides calls from ASan/TSan (__memcpy_chk and friends are
# not intercepted), so it is left out of Debug and sanitizer builds; the
# fuzz targets, built with ASan per target, undefine it themselves.
set(_rknp_flags "${CMAKE_C_FLAGS} ${CMAKE_CXX_FLAGS}")
if(NOT _rknp_flags MATCHES "_FORTIFY_SOURCE" AND NOT _rknp_flags MATCHES "-fsanitize=")
  add_compile_options($<$<NOT:$<CONFIG:Debug>>:-D_FORTIFY_SOURCE=2>)
endif()
