# Turns Lua scripts into a C header of string constants, so the scripts stay
# readable .lua files (try them in redis-cli) and are built into rankd.
# prelude.lua, what the scripts share, goes in front of each of the others.
# A file that registers a function (redis.register_function) is a function
# library (FUNCTION LOAD, FCALL): it gets the library's first line, named
# after a digest of its text so that rankds of different builds can share a
# Redis, and FUNCTION_NAME, the name of its function (given to rankd as
# rank_lua_<name>_function); prelude.lua's strings are then set by each
# call, as Redis lets a library read only its redis API while it loads.
# Usage: cmake -DOUT=header.h -DIN="a.lua|b.lua" -P embed.cmake
cmake_policy(SET CMP0054 NEW)
string(REPLACE "|" ";" IN "${IN}")
# window.lua, the rolling windows' part of the library, goes after the
# library's own text (update.lua), whose locals it assigns.
set(prelude_text "")
set(library_tail "")
foreach(path ${IN})
  get_filename_component(name ${path} NAME_WE)
  if(name STREQUAL "prelude")
    file(READ ${path} prelude_text)
  elseif(name STREQUAL "window")
    file(READ ${path} library_tail)
  endif()
endforeach()
file(WRITE ${OUT}.tmp "/* Generated from the .lua files of src/store/lua by src/store/embed.cmake. Do not edit. */\n")
foreach(path ${IN})
  get_filename_component(name ${path} NAME_WE)
  if(name STREQUAL "prelude" OR name STREQUAL "window")
    continue()
  endif()
  file(READ ${path} text)
  set(function_name "")
  if(text MATCHES "redis\\.register_function")
    set(strings "local sub, byte = string.sub, string.byte\n")
    string(FIND "${prelude_text}" "${strings}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "embed.cmake: prelude.lua no longer says ${strings}")
    endif()
    string(REPLACE "${strings}" "local sub, byte\n" library_prelude
                   "${prelude_text}")
    set(text "${text}${library_tail}")
    string(SHA1 digest "${library_prelude}${text}")
    string(SUBSTRING "${digest}" 0 16 digest)
    set(function_name "rankd_${name}_${digest}")
    set(text "#!lua name=rankd_${digest}\nlocal FUNCTION_NAME = '${function_name}'\n${library_prelude}${text}")
  else()
    set(text "${prelude_text}${text}")
  endif()
  string(REPLACE "\\" "\\\\" text "${text}")
  string(REPLACE "\"" "\\\"" text "${text}")
  string(REPLACE "\n" "\\n\"\n\"" text "${text}")
  file(APPEND ${OUT}.tmp "static const char rank_lua_${name}[] =\n\"${text}\";\n")
  if(NOT function_name STREQUAL "")
    file(APPEND ${OUT}.tmp "static const char rank_lua_${name}_function[] = \"${function_name}\";\n")
  endif()
endforeach()
file(RENAME ${OUT}.tmp ${OUT})
