# mt_sanitized_runtime(NAME FLAGS): the runtime (plan, runtime and kernel sources) compiled again
# with sanitizer (or fuzzer) flags, for the tests and the fuzz harnesses that link it.
get_target_property(MT_RUNTIME_SOURCES mt_runtime SOURCES)
get_target_property(MT_PLAN_SOURCES mt_plan SOURCES)
get_target_property(MT_KERNEL_SOURCES mt_kernels SOURCES)
set(MT_SANITIZED_SOURCES)
foreach(src ${MT_RUNTIME_SOURCES})
  list(APPEND MT_SANITIZED_SOURCES ${PROJECT_SOURCE_DIR}/runtime/${src})
endforeach()
foreach(src ${MT_PLAN_SOURCES})
  if(IS_ABSOLUTE ${src})
    list(APPEND MT_SANITIZED_SOURCES ${src})
  else()
    list(APPEND MT_SANITIZED_SOURCES ${PROJECT_SOURCE_DIR}/runtime/${src})
  endif()
endforeach()
foreach(src ${MT_KERNEL_SOURCES})
  list(APPEND MT_SANITIZED_SOURCES ${PROJECT_SOURCE_DIR}/kernels/${src})
endforeach()
# A copy of the runtime compiled with a sanitizer, for the executables below; with WITH_MPI (and
# MPI found), its data-parallel ranks on MPI as in mt_runtime.
function(mt_sanitized_runtime name flags)
  cmake_parse_arguments(ARG "WITH_MPI" "" "" ${ARGN})
  add_library(${name} STATIC ${MT_SANITIZED_SOURCES})
  add_dependencies(${name} mt_plan)
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  target_compile_options(${name} PUBLIC ${flags} -fno-omit-frame-pointer -O1 -g)
  target_link_options(${name} PUBLIC ${flags})
  target_link_libraries(${name} PUBLIC protobuf::libprotobuf OpenMP::OpenMP_CXX PkgConfig::OPENBLAS
                        nlohmann_json::nlohmann_json fmt::fmt ICU::uc ICU::i18n)
  # Built without CUDA: sanitizers check the host side, and the CUDA backend then refuses.
  if(ARG_WITH_MPI AND MPI_C_FOUND)
    target_link_libraries(${name} PUBLIC MPI::MPI_C)
    target_compile_definitions(${name} PRIVATE MT_MPI_ENABLED)
  endif()
endfunction()

