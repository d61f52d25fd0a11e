# Turns the viewer's files into a C header of string constants, so they stay
# ordinary .html/.js/.css files (open them, lint them) and are built into
# rankd: viewer.js becomes rank_web_viewer_js.
# Usage: cmake -DOUT=header.h -DIN="a.html|b.js" -P embed.cmake
string(REPLACE "|" ";" IN "${IN}")
file(WRITE ${OUT}.tmp "/* Generated from src/net/web by src/net/web/embed.cmake. Do not edit. */\n")
foreach(path ${IN})
  get_filename_component(name ${path} NAME)
  string(MAKE_C_IDENTIFIER "${name}" name)
  file(READ ${path} text)
  string(REPLACE "\\" "\\\\" text "${text}")
  string(REPLACE "\"" "\\\"" text "${text}")
  string(REPLACE "\n" "\\n\"\n\"" text "${text}")
  file(APPEND ${OUT}.tmp "static const char rank_web_${name}[] =\n\"${text}\";\n")
endforeach()
file(RENAME ${OUT}.tmp ${OUT})
