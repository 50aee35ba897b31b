# Locates kaio's dependencies (all from Debian packages, CUDA from the toolkit).
find_package(Threads REQUIRED)

find_path(KAIO_LMDB_INCLUDE lmdb.h REQUIRED)
# LMDB is linked statically so that binaries run where no liblmdb is installed.
find_library(KAIO_LMDB_STATIC NAMES liblmdb.a REQUIRED)
add_library(kaio_lmdb INTERFACE)
target_include_directories(kaio_lmdb SYSTEM INTERFACE $<BUILD_INTERFACE:${KAIO_LMDB_INCLUDE}>)
target_link_libraries(kaio_lmdb INTERFACE $<BUILD_INTERFACE:${KAIO_LMDB_STATIC}>)

find_path(KAIO_XXHASH_INCLUDE xxhash.h REQUIRED)
find_path(KAIO_SPDLOG_INCLUDE spdlog/spdlog.h REQUIRED)

find_library(KAIO_NVJITLINK NAMES nvJitLink PATHS ${KAIO_CUDA_HOME}/lib64 NO_DEFAULT_PATH REQUIRED)
add_library(kaio_nvjitlink INTERFACE)
target_link_libraries(kaio_nvjitlink INTERFACE $<BUILD_INTERFACE:${KAIO_NVJITLINK}>)
