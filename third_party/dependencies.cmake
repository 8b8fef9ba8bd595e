# External dependencies, found on the system (Debian packages; no copied source):
#   yaml-cpp   libyaml-cpp-dev      model files
#   libpng     libpng-dev           PNG decoding
#   libjpeg    libjpeg-dev          JPEG decoding (libjpeg-turbo)
#   nlohmann   nlohmann-json3-dev   JSON: safetensors headers, --json reports, traces
#   GoogleTest libgtest-dev         tests
#   CLI11      libcli11-dev         command lines of the apps (header-only; not needed to embed)
# Each is exposed as an imported target cnnrt::<name> so the rest of the build never spells out
# where a dependency came from.

# Also included by the installed cnnrtConfig.cmake, hence the guards against defining twice.
if(TARGET cnnrt::yaml)
  return()
endif()

find_package(yaml-cpp REQUIRED)
add_library(cnnrt::yaml INTERFACE IMPORTED)
if(TARGET yaml-cpp::yaml-cpp)
  target_link_libraries(cnnrt::yaml INTERFACE yaml-cpp::yaml-cpp)
else()
  target_link_libraries(cnnrt::yaml INTERFACE yaml-cpp)
endif()

find_package(nlohmann_json REQUIRED)
add_library(cnnrt::json INTERFACE IMPORTED)
target_link_libraries(cnnrt::json INTERFACE nlohmann_json::nlohmann_json)

# Image decoders (runtime/image.cpp, docs/RELIABILITY.md says why these two).
find_package(PNG REQUIRED)
find_package(JPEG REQUIRED)
add_library(cnnrt::image_codecs INTERFACE IMPORTED)
target_link_libraries(cnnrt::image_codecs INTERFACE PNG::PNG JPEG::JPEG)
# Debian keeps jconfig.h (included by jpeglib.h) in the multiarch folder; a compiler searches it
# for /usr but not for a private prefix such as scripts/gpu_check.sh's unpacked .deb files.
if(CMAKE_LIBRARY_ARCHITECTURE AND EXISTS "${JPEG_INCLUDE_DIR}/${CMAKE_LIBRARY_ARCHITECTURE}/jconfig.h")
  target_include_directories(cnnrt::image_codecs INTERFACE
                             "${JPEG_INCLUDE_DIR}/${CMAKE_LIBRARY_ARCHITECTURE}")
endif()

if(CNNRT_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()

# Only the apps use it; an application embedding cnnrt (cnnrtConfig.cmake) never needs it.
if(CNNRT_BUILDING_APPS AND NOT TARGET CLI11::CLI11)
  find_package(CLI11 CONFIG REQUIRED)
endif()
