# Installation for applications that embed cnnrt (included by the top CMakeLists.txt):
#   - the public headers (include/cnnrt: no CUDA header, whatever the build);
#   - the static libraries, always, and with CNNRT_SHARED also libcnnrt.so, which exports only
#     the public API (runtime/libcnnrt.map) and carries its dependencies (yaml-cpp, libpng,
#     libjpeg, CUDA) privately: an application linking it needs neither their -dev packages
#     nor CUDA headers;
#   - a CMake package: find_package(cnnrt) gives cnnrt::cnnrt, the shared library when it was
#     installed, else the static ones (set CNNRT_USE_STATIC=ON before find_package to insist on
#     them);
#   - pkg-config files: cnnrt.pc (shared when built, else static) and cnnrt-static.pc;
#   - the CLIs, cnnrt and alexnet_infer (linked statically: they use internal headers).
include(CMakePackageConfigHelpers)

# Shared objects (libcnnrt.so, the Python module) need the shared builds of the image
# libraries: a static libz.a or libpng.a is usually not position-independent and fails to link
# into them.  Build without both then, and say so, rather than fail the whole build.
foreach(library IN LISTS PNG_LIBRARIES JPEG_LIBRARIES)
  if(library MATCHES "\\.a$" AND (CNNRT_SHARED OR CNNRT_BUILD_PYTHON))
    message(WARNING "cnnrt: ${library} is a static archive: building neither libcnnrt.so nor "
                    "the Python module (give CMake the shared library, e.g. -DZLIB_LIBRARY=...)")
    set(CNNRT_SHARED OFF)
    set(CNNRT_BUILD_PYTHON OFF)
  endif()
endforeach()
set(CNNRT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/cnnrt)
set(CNNRT_PKGCONFIG_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

set(CNNRT_STATIC_TARGETS cnnrt cnnrt_graph cnnrt_kernels_cpu)
if(CNNRT_HAVE_CUDA)
  list(APPEND CNNRT_STATIC_TARGETS cnnrt_kernels_cuda)
endif()
install(TARGETS ${CNNRT_STATIC_TARGETS} EXPORT cnnrtTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT cnnrtTargets NAMESPACE cnnrt:: DESTINATION ${CNNRT_CMAKE_DIR})
install(DIRECTORY include/cnnrt DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

if(CNNRT_SHARED)
  # No sources of its own: every object of libcnnrt.a goes in (so the whole public API is
  # there), plus what those objects use from the other static libraries.  CMake needs one source.
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/cnnrt_shared.cpp
       "// libcnnrt.so is made of libcnnrt.a; see cmake/install.cmake\n")
  add_library(cnnrt_shared SHARED ${CMAKE_CURRENT_BINARY_DIR}/cnnrt_shared.cpp)
  target_link_libraries(cnnrt_shared PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,cnnrt>")
  target_include_directories(cnnrt_shared PUBLIC
      $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  set(CNNRT_EXPORT_MAP ${CMAKE_CURRENT_SOURCE_DIR}/runtime/libcnnrt.map)
  target_link_options(cnnrt_shared PRIVATE "LINKER:--version-script=${CNNRT_EXPORT_MAP}")
  set_target_properties(cnnrt_shared PROPERTIES
      OUTPUT_NAME cnnrt EXPORT_NAME cnnrt LINK_DEPENDS ${CNNRT_EXPORT_MAP}
      VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib
      # Its dependencies outside the system folders (the CUDA toolkit's, a private prefix's) are
      # found through its RUNPATH, by the loader and by the linker of an application.
      INSTALL_RPATH_USE_LINK_PATH TRUE)
  install(TARGETS cnnrt_shared EXPORT cnnrtSharedTargets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(EXPORT cnnrtSharedTargets NAMESPACE cnnrt:: DESTINATION ${CNNRT_CMAKE_DIR})
endif()

configure_package_config_file(third_party/cnnrtConfig.cmake.in
    ${CMAKE_CURRENT_BINARY_DIR}/cnnrtConfig.cmake INSTALL_DESTINATION ${CNNRT_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/cnnrtConfigVersion.cmake
    COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/cnnrtConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/cnnrtConfigVersion.cmake
              third_party/dependencies.cmake
        DESTINATION ${CNNRT_CMAKE_DIR})

# --- pkg-config ---------------------------------------------------------------------------------
# Relocatable: the prefix is found from the .pc file's own folder, so `cmake --install --prefix`
# anywhere works.  The static file lists the dependencies' libraries by the paths this build
# linked (yaml-cpp, libpng + zlib, libjpeg, and cudart/cuBLAS/cuBLASLt/cuDNN/cuSPARSELt with
# CUDA).
file(RELATIVE_PATH CNNRT_PC_TO_PREFIX ${CMAKE_INSTALL_PREFIX}/${CNNRT_PKGCONFIG_DIR}
     ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" CNNRT_PC_TO_PREFIX "${CNNRT_PC_TO_PREFIX}")
set(CNNRT_PC_HEADER "prefix=\${pcfiledir}/${CNNRT_PC_TO_PREFIX}
libdir=\${prefix}/${CMAKE_INSTALL_LIBDIR}
includedir=\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}

Name: cnnrt
Description: Minimal CNN inference runtime (CPU and CUDA)
Version: ${PROJECT_VERSION}
Cflags: -I\${includedir}
")
# (The archives by path: -lcnnrt would pick libcnnrt.so, which sits in the same folder.)
set(CNNRT_PC_STATIC_LIBS "\${libdir}/libcnnrt.a")
if(CNNRT_HAVE_CUDA)
  string(APPEND CNNRT_PC_STATIC_LIBS " \${libdir}/libcnnrt_kernels_cuda.a")
endif()
string(APPEND CNNRT_PC_STATIC_LIBS " \${libdir}/libcnnrt_kernels_cpu.a \${libdir}/libcnnrt_graph.a")
set(CNNRT_YAML_TARGET yaml-cpp)
if(TARGET yaml-cpp::yaml-cpp)
  get_target_property(CNNRT_YAML_TYPE yaml-cpp::yaml-cpp TYPE)
  if(NOT CNNRT_YAML_TYPE STREQUAL "INTERFACE_LIBRARY")
    set(CNNRT_YAML_TARGET yaml-cpp::yaml-cpp)
  endif()
endif()
string(APPEND CNNRT_PC_STATIC_LIBS " $<TARGET_LINKER_FILE:${CNNRT_YAML_TARGET}>")
foreach(library IN LISTS PNG_LIBRARIES JPEG_LIBRARIES)
  string(APPEND CNNRT_PC_STATIC_LIBS " ${library}")
endforeach()
if(CNNRT_HAVE_CUDA)
  # cuBLASLt is loaded at run time (kernels/cuda/cublaslt_loader.cpp): libdl, not the library.
  string(APPEND CNNRT_PC_STATIC_LIBS " $<TARGET_LINKER_FILE:CUDA::cudart>")
  foreach(library IN LISTS CMAKE_DL_LIBS)
    string(APPEND CNNRT_PC_STATIC_LIBS " -l${library}")
  endforeach()
  if(CNNRT_CUDNN_LIBRARY AND CNNRT_CUDNN_INCLUDE)
    string(APPEND CNNRT_PC_STATIC_LIBS " ${CNNRT_CUDNN_LIBRARY}")
  endif()
  if(CNNRT_HAVE_CUSPARSELT)  # a pip wheel's folder, on no loader path: hence the rpath
    string(APPEND CNNRT_PC_STATIC_LIBS
           " -Wl,-rpath,${CNNRT_CUSPARSELT_LIBRARY_DIR} ${CNNRT_CUSPARSELT_LIBRARY}")
  endif()
endif()
file(GENERATE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/pkgconfig/cnnrt-static.pc
     CONTENT "${CNNRT_PC_HEADER}Libs: ${CNNRT_PC_STATIC_LIBS}\n")
if(CNNRT_SHARED)
  file(GENERATE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/pkgconfig/cnnrt.pc
       CONTENT "${CNNRT_PC_HEADER}Libs: -L\${libdir} -lcnnrt\n")
else()
  file(GENERATE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/pkgconfig/cnnrt.pc
       CONTENT "${CNNRT_PC_HEADER}Libs: ${CNNRT_PC_STATIC_LIBS}\n")
endif()
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/pkgconfig/cnnrt.pc
              ${CMAKE_CURRENT_BINARY_DIR}/pkgconfig/cnnrt-static.pc
        DESTINATION ${CNNRT_PKGCONFIG_DIR})

# --- the CLIs -----------------------------------------------------------------------------------
install(TARGETS alexnet_infer cnnrt_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
