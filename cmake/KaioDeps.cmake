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

# The remote cache tier: hiredis (Redis protocol) and OpenSSL's libcrypto (HMAC-SHA256),
# both linked statically so that binaries run where neither is installed. Their headers
# are in the default include path (<hiredis/hiredis.h>, <openssl/hmac.h>).
find_path(KAIO_HIREDIS_INCLUDE hiredis/hiredis.h REQUIRED)
find_library(KAIO_HIREDIS_STATIC NAMES libhiredis.a REQUIRED)
find_path(KAIO_OPENSSL_INCLUDE openssl/hmac.h REQUIRED)
# Static libcrypto adds ~4.6 MB to each executable; OFF links the system libcrypto.so.3
# (Debian 12 and Ubuntu 24.04 both have it) to keep carried build folders small.
option(KAIO_STATIC_CRYPTO "Link OpenSSL's libcrypto statically" ON)
if(KAIO_STATIC_CRYPTO)
  set(KAIO_CRYPTO_NAME libcrypto.a)
  find_library(KAIO_CRYPTO_STATIC_LIB NAMES libcrypto.a REQUIRED)
  set(KAIO_CRYPTO_LIB ${KAIO_CRYPTO_STATIC_LIB})
else()
  set(KAIO_CRYPTO_NAME libcrypto.so.3)
  find_library(KAIO_CRYPTO_SHARED_LIB NAMES libcrypto.so.3 crypto REQUIRED)
  set(KAIO_CRYPTO_LIB ${KAIO_CRYPTO_SHARED_LIB})
endif()
add_library(kaio_remote_deps INTERFACE)
# libcrypto.a needs libdl and pthreads (both in glibc on the target machines).
target_link_libraries(kaio_remote_deps INTERFACE $<BUILD_INTERFACE:${KAIO_HIREDIS_STATIC}>
                                                 $<BUILD_INTERFACE:${KAIO_CRYPTO_LIB}> ${CMAKE_DL_LIBS})
