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
