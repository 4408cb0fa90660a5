# Optional CUDA parts: the CUDA compiler and toolkit, cuBLAS, NCCL and CUPTI.
# Sets PIPESCOPE_HAVE_CUDA, PIPESCOPE_HAVE_NCCL, PIPESCOPE_HAVE_CUPTI and says in the feature
# summary what was found and what was left out.
set(PIPESCOPE_HAVE_CUDA OFF)
set(PIPESCOPE_HAVE_NCCL OFF)
set(PIPESCOPE_HAVE_CUPTI OFF)

if(PIPESCOPE_ENABLE_CUDA)
    # nvcc rejects 'native' without a GPU; name the architectures we ship for (A100, H100).
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
        set(CMAKE_CUDA_ARCHITECTURES "80;90" CACHE STRING "CUDA architectures to build for")
    endif()
    # Without this both the static and the shared cudart end up on the link line.
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    include(CheckLanguage)
    check_language(CUDA)
    if(CMAKE_CUDA_COMPILER)
        enable_language(CUDA)
        find_package(CUDAToolkit)
        if(CUDAToolkit_FOUND)
            set(PIPESCOPE_HAVE_CUDA ON)
        endif()
    endif()
endif()

if(PIPESCOPE_HAVE_CUDA)
    set_package_properties(CUDAToolkit PROPERTIES TYPE OPTIONAL
        PURPOSE "CUDA kernels, cuBLAS GEMMs and the runner's cuda backend")
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV NCCL_HOME
              PATH_SUFFIXES include)
    # The pip package (nvidia-nccl-cu13) has only the versioned libnccl.so.2.
    find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${CUDAToolkit_LIBRARY_DIR} ENV NCCL_HOME
                 PATH_SUFFIXES lib lib64)
    if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
        set(PIPESCOPE_HAVE_NCCL ON)
        if(NOT TARGET pipescope::nccl)
            add_library(pipescope::nccl UNKNOWN IMPORTED)
            set_target_properties(pipescope::nccl PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                                  INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
        endif()
        file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_version_lines REGEX "#define NCCL_(MAJOR|MINOR|PATCH) ")
        string(REGEX REPLACE ".*NCCL_MAJOR ([0-9]+).*NCCL_MINOR ([0-9]+).*NCCL_PATCH ([0-9]+).*" "\\1.\\2.\\3"
               PIPESCOPE_NCCL_VERSION "${_nccl_version_lines}")
    endif()
    if(TARGET CUDA::cupti)
        set(PIPESCOPE_HAVE_CUPTI ON)
    endif()
    message(STATUS "CUDA ${CUDAToolkit_VERSION} (${CMAKE_CUDA_COMPILER}), architectures ${CMAKE_CUDA_ARCHITECTURES}")
    if(PIPESCOPE_HAVE_NCCL)
        message(STATUS "NCCL ${PIPESCOPE_NCCL_VERSION}: ${NCCL_LIBRARY}")
    else()
        message(STATUS "NCCL not found: multi-GPU communication is left out")
    endif()
endif()

add_feature_info(CUDA PIPESCOPE_HAVE_CUDA "CUDA backend of the runner (nvcc + CUDA toolkit)")
add_feature_info(NCCL PIPESCOPE_HAVE_NCCL "NCCL communicators for ranks on distinct GPUs")
add_feature_info(CUPTI PIPESCOPE_HAVE_CUPTI "CUPTI activity tracing into the Nsight-compatible tables")
