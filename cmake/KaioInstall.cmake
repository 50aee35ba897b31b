# cmake --install: libkaio.a, headers under include/kaio/, and a CMake package so that
# find_package(kaio CONFIG) gives kaio::kaio.
include(CMakePackageConfigHelpers)

foreach(dir ir codegen jit cache tuner ops)
  install(DIRECTORY ${CMAKE_SOURCE_DIR}/${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kaio/${dir}
          FILES_MATCHING PATTERN "*.h" PATTERN "*.def")
endforeach()
install(FILES ${CMAKE_SOURCE_DIR}/kaio.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kaio)

install(TARGETS kaio kaio_lmdb kaio_nvjitlink kaio_remote_deps EXPORT kaioTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT kaioTargets NAMESPACE kaio:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kaio)

configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/kaioConfig.cmake.in
  ${CMAKE_BINARY_DIR}/kaioConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kaio)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/kaioConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/kaioConfig.cmake ${CMAKE_BINARY_DIR}/kaioConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kaio)
