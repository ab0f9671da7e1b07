# gpuplan_target_defaults(<target>): warnings (as errors with GPUPLAN_WERROR) and sanitizers (GPUPLAN_SANITIZE).
function(gpuplan_target_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
                                           -Wnon-virtual-dtor -Wold-style-cast -Woverloaded-virtual)
  if(GPUPLAN_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

if(GPUPLAN_SANITIZE)
  # float-cast-overflow is not part of GCC's -fsanitize=undefined: a double out of an integer's range (inf, 1e300)
  # converted to it is undefined behaviour that the hostile-input rules must never reach (docs/reliability.md).
  # Signed integer overflow is part of undefined.
  add_compile_options(-fsanitize=address,undefined,float-cast-overflow -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=address,undefined,float-cast-overflow)
endif()

# gpuplan_no_pie_under_sanitizers(<executable>): link without PIE under GPUPLAN_SANITIZE. A PIE build of the CLI or of
# a test carries ~2.7 million dynamic relocations (ASan/UBSan metadata) and applying them took half of each start
# (`gpuplan --version` 0.79 s with PIE, 0.45 s without); the test suite starts a test executable per test case and the
# CLI thousands of times. Not for the Qt executables (Qt's own rules on position-independent code).
function(gpuplan_no_pie_under_sanitizers target)
  if(GPUPLAN_SANITIZE)
    target_link_options(${target} PRIVATE -no-pie)
  endif()
endfunction()
