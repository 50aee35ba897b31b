# cmake --install: libkaio.a, headers under include/kaio/, and a CMake package so that
# find_package(kaio CONFIG) gives kaio::kaio.
include(CMakePackageConfigHelpers)

# Only the public API is installed: the headers an application includes and what they
# include. Everything else (cache/, codegen/emitter.h, the interpreter's internals, the
# matmul engines, the kernel layer ops/kernel/, jit's driver and backend) stays in the
# source tree; scripts/check-installed-headers.sh checks that each installed header
# compiles on its own and that no internal one is installed.
set(KAIO_PUBLIC_HEADERS
  kaio.h
  ir/builder.h ir/builder_warp.h ir/error.h ir/fp8.h ir/half.h ir/kernel.h ir/layouts.h ir/mma_layout.h ir/op_table.h ir/ops.def
  ir/types.h ir/interp/interp.h
  codegen/ptx.h
  jit/buffer.h jit/compile.h jit/compiled_kernel.h jit/device.h jit/event.h jit/family.h jit/resources.h
  jit/tensor_map.h
  tuner/tuner.h
  quant/blocks.h quant/gguf.h ops/quant_matvec.h
  ops/attention.h ops/attention_backward.h ops/catalog.h ops/device_arg.h ops/elementwise.h ops/map.h ops/matmul.h ops/matmul_auto.h ops/matmul_engines.def
  ops/norm.h ops/qmatmul.h ops/reduction.h ops/rope.h ops/row_kernel.h ops/rows.h ops/softmax.h)
foreach(h ${KAIO_PUBLIC_HEADERS})
  get_filename_component(d ${h} DIRECTORY)
  install(FILES ${CMAKE_SOURCE_DIR}/${h} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kaio/${d})
endforeach()

install(TARGETS kaio kaio_lmdb kaio_nvjitlink kaio_remote_deps EXPORT kaioTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT kaioTargets NAMESPACE kaio:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kaio)

configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/kaioConfig.cmake.in
  ${CMAKE_BINARY_DIR}/kaioConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kaio)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/kaioConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/kaioConfig.cmake ${CMAKE_BINARY_DIR}/kaioConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kaio)
