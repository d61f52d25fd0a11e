# Run by cmake --install (see CMakeLists.txt): installs the sample config and
# the systemd unit, written from rankd.service.in with the paths rankd and
# the config are installed at.
#
# This runs at install time because only then is the prefix final:
# `cmake --install BUILD --prefix DIR` changes CMAKE_INSTALL_PREFIX after
# configuration. Directories follow GNUInstallDirs: relative ones are under
# the prefix, except that the default sysconfdir of prefix / or /usr is /etc,
# and of /opt/NAME is /etc/opt/NAME; absolute ones
# (-DCMAKE_INSTALL_SYSCONFDIR=/etc) stay. DESTDIR, a staging root, is not
# part of the paths the unit names.
#
# Set by CMakeLists.txt before this runs: RANKD_SOURCE_DIR, RANKD_BINARY_DIR,
# RANKD_BINDIR, RANKD_SYSCONFDIR, RANKD_DOCDIR.

set(prefix "${CMAKE_INSTALL_PREFIX}")
string(REGEX REPLACE "(.)/+$" "\\1" prefix "${prefix}")

foreach(dir BINDIR SYSCONFDIR DOCDIR)
  if(IS_ABSOLUTE "${RANKD_${dir}}")
    set(full_${dir} "${RANKD_${dir}}")
  elseif(prefix STREQUAL "/")
    set(full_${dir} "/${RANKD_${dir}}")
  else()
    set(full_${dir} "${prefix}/${RANKD_${dir}}")
  endif()
endforeach()
if(RANKD_SYSCONFDIR STREQUAL "etc")
  if(prefix STREQUAL "/" OR prefix STREQUAL "/usr")
    set(full_SYSCONFDIR "/etc")
  elseif(prefix MATCHES "^/opt/")
    set(full_SYSCONFDIR "/etc${prefix}")
  endif()
endif()

file(INSTALL "${RANKD_SOURCE_DIR}/packaging/rankd.conf"
     DESTINATION "${full_SYSCONFDIR}/rankd")

set(RANKD_BIN "${full_BINDIR}/rankd")
set(RANKD_CONFIG "${full_SYSCONFDIR}/rankd/rankd.conf")
set(RANKD_ENV "${full_SYSCONFDIR}/rankd/rankd.env")
set(RANKD_DOC "${full_DOCDIR}")
configure_file("${RANKD_SOURCE_DIR}/packaging/rankd.service.in"
               "${RANKD_BINARY_DIR}/rankd.service" @ONLY)
file(INSTALL "${RANKD_BINARY_DIR}/rankd.service"
     DESTINATION "${prefix}/lib/systemd/system")
