"""Exact facts a summary must never lose, and the check that a summary kept them.

``extract_facts`` finds the strings that summarising would blur: numbers of three or more digits
(a dotted run such as an IP address or a version is one number, and so is a hyphenated one such
as ``555-01162`` or ``123-45-6789``, while a rising pair such as ``1990-2000`` is a range of two),
ids and codes (``ORD-2024-001``, ``HAT123``, ``nora_vance_5172``, the ``A1B2C3`` of ``订单 #A1B2C3``
or ``order #A1B2C3``), money
(``¥1,299.00``, ``1，299元``, ``¥1.2万``, ``8千元``, ``$2.5M``, ``1万2千円``, ``3만원``, any
currency sign, amounts grouped as each locale writes them: ``₹1,50,000``, ``12 500 ₽``,
``€1.200,50``, ``CHF 1'250.00``, ``5.000.000 ₫``, ``Rp 1.500.000``, ``JP¥1,000``, a minus
before the sign: ``-€5.00``), dates and times (``下午3:30``, ``午後3時30分``,
``12월 3일 오후 3시``), emails, phone numbers (``555-0142``, ``+44 20 7946 0958``,
``+91 98765 43210``, ``020 7946 0958``, ``030 12345678``, ``(03) 1234-5678``), URLs (with
their own closing bracket: ``…/wiki/Mercury_(planet)``), IBANs in groups, street addresses
(English and Chinese, ``350 5th Ave``), UK postcodes (``SW1A 1AA``), versions (``v2.3.1``,
``1.0.0-rc.1``) and tracking numbers. Traditional Chinese reads as Simplified (``¥1.2萬元``,
``臺北市信義區信義路五段7號``). It is rule
based and deterministic: facts come out in order of first appearance, each once, as they were
written, never a piece of a longer value. ``missing_facts`` says which required facts a text does
not contain, comparing with whitespace removed and full-width characters folded (``２０２４`` is
``2024``).

Pure functions of their input; no I/O, no model.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from contextwright.analysis import HAN, cjk_class, is_cjk_char
from contextwright.core.caches import (
    BoundedCache,
    call_bytes,
    memoized,
    register_cache,
    text_bytes,
)

__all__ = ["extract_facts", "fact_key", "fact_kind", "looks_like_fence_marker", "missing_facts",
           "without_framing"]

# ASCII-alphanumeric boundaries: Python's \b sees CJK as word characters, so "订单号20241001"
# has no \b before the digits. These look only at ASCII letters and digits.
_A = r"(?<![A-Za-z0-9])"
_Z = r"(?![A-Za-z0-9])"
_NUM = r"\d+(?:\.\d+)?"
# Digits in thousands groups ("1,299", "1，299"). Chinese text typed with a full-width keyboard
# writes the separator as "，", which is also the usual clause break ("买了3件，299元一件", "数量3，
# 单价…"): it groups only where the grouping rule allows, one to three digits before it and
# exactly three after, with no digit right after those three ("1，2345" is "1" and "2345").
_GROUPED = r"\d{1,3}(?:[,，]\d{3}(?!\d))+"
# Other locales group otherwise, and a piece of such an amount must never pass for the amount:
# Indian lakh commas ("1,50,000"), a space — plain, no-break, narrow no-break or thin, as
# locale formatters write it ("12 500 ₽", "12\u202f500,00 €") — or an apostrophe ("1'250.00"),
# each group after the first exactly three digits. Dots group only before a decimal comma
# ("1.299,00 €"): "1.299" alone is a decimal.
_GROUP_SPACE = "[ \u00a0\u202f\u2009]"
_LAKH = r"\d{1,2}(?:,\d{2})+,\d{3}(?!\d)"
_SPACED = r"\d{1,3}(?:" + _GROUP_SPACE + r"\d{3}(?!\d))+"
_APOSTROPHED = r"\d{1,3}(?:['’]\d{3}(?!\d))+"
_DECIMAL_COMMA = r",\d{1,2}(?!\d)"
_DOT_GROUPED = r"\d{1,3}(?:\.\d{3})+" + _DECIMAL_COMMA
# Two or more dot groups and no decimal part ("5.000.000 ₫", "Rp 1.500.000"): next to a currency
# that is a whole amount, as Vietnam and Indonesia write it ("1.500" alone stays a decimal).
_DOT_GROUPED_WHOLE = r"\d{1,3}(?:\.\d{3}){2,}(?!\d)"
_GROUPED_FORMS = (r"(?:" + _LAKH + "|" + _GROUPED + "|" + _APOSTROPHED + r")(?:\.\d+)?"
                  r"|" + _SPACED + r"(?:\.\d+|" + _DECIMAL_COMMA + r")?|" + _DOT_GROUPED)
# A bare number keeps a comma after it out ("1299,50": in English text a list may go on so).
_NUMBER_FORMS = _GROUPED_FORMS + r"|\d+(?:\.\d+)?"
# Next to a currency a comma after one or two digits is a decimal comma ("12,50 €", "€1,50").
_AMOUNT = (_GROUPED_FORMS + "|" + _DOT_GROUPED_WHOLE + r"|\d+(?:\.\d+|" + _DECIMAL_COMMA
           + r")?")
# Every currency sign (Unicode category Sc; a test keeps the table whole), the whole currency
# block so that signs added to it later count too, and the prefixes that qualify a dollar.
_CURRENCY_SIGN = ("[\\u0024\\u00a2-\\u00a5\\u058f\\u060b\\u07fe-\\u07ff\\u09f2-\\u09f3\\u09fb"
                  "\\u0af1\\u0bf9\\u0e3f\\u17db\\u20a0-\\u20cf\\ua838\\ufdfc\\ufe69\\uff04"
                  "\\uffe0-\\uffe1\\uffe5-\\uffe6\\U00011fdd-\\U00011fe0\\U0001e2ff"
                  "\\U0001ecb0]")
_CURRENCY_PREFIX = r"(?:US|HK|NT|AU|NZ|MX|A|C|S|R)\$|(?:JP|CN)[¥￥]|Rs\.?|Rp\.?"
_CURRENCY_CODES = ("USD|RMB|CNY|EUR|GBP|JPY|HKD|TWD|NTD|CHF|INR|KRW|RUB|ILS|THB|AUD|CAD|SGD|NZD|"
                   "SEK|NOK|DKK|PLN|CZK|HUF|BRL|MXN|ZAR|TRY|AED|SAR|MYR|IDR|PHP|VND")
# Currency words written after an amount ("25 000 Kč", "1 299,99 zł", "500 руб."); no letter
# may go on from them.
_CURRENCY_WORDS = (r"(?:dollars?|euros?|bucks|zł|Kč|kr|Ft|lei|рублей|рубля|рубль|руб\.?|грн)"
                   r"(?![^\W\d_])")
# A Chinese, Japanese or Korean order of magnitude ("¥1.2万", "1万2千円", "3만원", "1억 2천만 원")
# is part of the value, not a word after it (Korean may write a space around it). Alone, only
# 万/亿/만/억 make an amount ("2.5万"): a bare 千 is left alone ("3千米" is a distance) unless a
# currency follows ("8千元").
_CJK_MAGNITUDE = r"(?:[百千万亿]|\s?[백천만억])"
_CJK_MAGNITUDES = (r"(?:" + _CJK_MAGNITUDE + r"+(?:(?<=[백천만억])\s)?\d+(?:\.\d+)?)*"
                   + _CJK_MAGNITUDE + "+")
_CJK_CURRENCY = r"(?:元|块钱|块|円|圆|원|美元|欧元|英镑|日元|日圆|港币|人民币|新台币|台币|韩元)"
# What a currency sign's amount may go on with ("¥1.2万元", "￥3千元", "$2.5M").
_SIGN_TAIL = r"(?:" + _CJK_MAGNITUDES + r"(?:元|円|원)?|元|円|원|bn|mn|[KkMmBb])?"

_MONTHS = ("January|February|March|April|May|June|July|August|September|October|November|"
           "December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec")
# Month names of the languages that write the day first, in any case: French, German, Spanish,
# Italian, Portuguese, Dutch, and Russian in the genitive ("3 mars 2024", "3. März 2024",
# "15 de marzo de 2024", "3 марта 2024 г."). Without them only the year of such a date was a
# fact, and a summary could move the day unnoticed.
_DAY_FIRST_MONTHS = (
    "janvier|février|fevrier|mars|avril|mai|juin|juillet|août|aout|septembre|octobre|novembre"
    "|décembre|decembre|Januar|Jänner|Februar|März|Maerz|April|Juni|Juli|August|Oktober"
    "|Dezember|enero|febrero|marzo|abril|mayo|junio|julio|agosto|septiembre|setiembre"
    "|octubre|noviembre|diciembre|gennaio|febbraio|aprile|maggio|giugno|luglio|settembre"
    "|ottobre|dicembre|janeiro|fevereiro|março|marco|maio|junho|julho|setembro|outubro"
    "|dezembro|januari|februari|maart|mei|augustus|december|января|февраля|марта|апреля|мая"
    "|июня|июля|августа|сентября|октября|ноября|декабря"
)
_DAY_FIRST_DATE = (r"(?:1er|\d{1,2}\.?)\s(?:de\s)?(?i:" + _DAY_FIRST_MONTHS
                   + r")(?![^\W\d_])(?:,?\s(?:de\s)?\d{4}(?:\sг\.?)?)?")
# "午后" is also the Japanese "午後" folded ("午後3時30分").
_DAYPART = r"(?:上午|下午|晚上|早上|中午|凌晨|傍晚|午前|午后)"
_CLOCK = r"\d{1,2}:\d{2}(?::\d{2})?(?:\s?(?:[AaPp][Mm]|[AaPp]\.[Mm]\.))?"
# An hour in Chinese or Japanese ("8点半", "3时30分", "15時30分" folded); "时间" (時間) is a
# duration ("5時間"), not a time of day.
_CJK_HOUR = r"\d{1,2}(?:点|时(?!间))(?:\d{1,2}分|半)?"
# The part of the day is part of a Chinese time ("下午3:30" is 15:30), whichever way it is written.
_ZH_TIME = r"(?:" + _DAYPART + r"?" + _CJK_HOUR + r"|" + _DAYPART + r"\s?" + _CLOCK + r")"
# Korean ("오후 3시 30분", "12월 3일 오후 3시"); "시간" is a duration ("3시간").
_KO_DAYPART = r"(?:오전|오후|아침|저녁|새벽|밤|낮)"
_KO_TIME = (r"(?:" + _KO_DAYPART + r"\s?)?\d{1,2}시(?!간)(?:\s?\d{1,2}분|\s?반)?|" + _KO_DAYPART
            + r"\s?" + _CLOCK)
_KO_DATES = [
    r"(?:\d{2,4}년\s?)?\d{1,2}월\s?\d{1,2}일(?:\s?(?:" + _KO_TIME + r"))?",
    r"\d{4}년\s?\d{1,2}월",
    _KO_TIME,
]

_URL = r"(?:https?://|www\.)[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+"
# Bounded parts (RFC 5321 limits): an unbounded local part rescans a long run of id-like
# characters from every position, which is quadratic.
_EMAIL = (_A + r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,8}"
          r"\.[A-Za-z]{2,24}" + _Z)

_DATES = [
    r"\d{4}-\d{1,2}-\d{1,2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?",
    r"\d{4}[/.]\d{1,2}[/.]\d{1,2}",
    r"\d{1,2}/\d{1,2}/\d{2,4}",
    r"(?:\d{2,4}年)?\d{1,2}月\d{1,2}[日号](?:\s?" + _DAYPART + r"?\s?(?:"
    + _CLOCK + r"|" + _CJK_HOUR + r"))?",
    r"\d{4}年\d{1,2}月",
    r"(?:" + _MONTHS + r")\.?\s\d{1,2}(?:st|nd|rd|th)?(?:,?\s\d{4})?",
    r"\d{1,2}(?:st|nd|rd|th)?\s(?:" + _MONTHS + r")\.?(?:,?\s\d{4})?",
    _DAY_FIRST_DATE,
    _CLOCK,
    r"\d{1,2}\s?(?:[AaPp][Mm]|[AaPp]\.[Mm]\.)",
    _ZH_TIME,
]

# An English order of magnitude ("$2.5M", "$1.2K", "€3bn") is part of the value too: without
# it "$2.5M" would read as "$2".
_MAGNITUDE = r"(?:bn|mn|[KkMmBb])?"
# Where an amount written before its currency may start: not inside a run of groups ("234" of
# "1,234", "50" of "1,50,000") or of magnitudes ("2" of "1万2千"), which is no amount of its own;
# starting at every group of a long run would also rescan the run each time (quadratic).
_AMOUNT_START = (_A + r"(?<![百千万亿백천만억])(?<![백천만억]\s)"
                 r"(?!(?<=\d[,，.'’ \u00a0\u202f\u2009])\d{3}(?!\d))(?!(?<=\d,)\d{2},\d)")
# A minus right before the sign is part of the amount ("-€5.00" is a refund, not a charge).
_SIGNED_MONEY = [
    r"[-\u2212]?(?:" + _CURRENCY_PREFIX + "|" + _CURRENCY_SIGN + r")\s?(?:" + _AMOUNT + r")"
    + _SIGN_TAIL,
    r"(?:" + _CURRENCY_CODES + r")\s?(?:" + _AMOUNT + r")" + _SIGN_TAIL,
]
# The currency after the amount, each with what a text must hold for the rule to be worth
# running: most numbers have none of these after them.
_MONEY_BEFORE_CURRENCY = [
    (r"(?:" + _AMOUNT + r")(?:" + _CJK_MAGNITUDES + r")?\s?" + _CJK_CURRENCY, "[元块円圆원币]"),
    (r"(?:" + _AMOUNT + r")" + _MAGNITUDE + r"\s?(?:" + _CURRENCY_CODES + "|" + _CURRENCY_WORDS
     + ")", "[A-Z]{3}|dollar|euro|buck|zł|Kč|kr|Ft|lei|руб|грн"),
    # A sign after the amount ("12 500 ₽", "30 €"), unless it is the next amount's ("100 $200")
    # or the amount has one before it already.
    (r"(?<!" + _CURRENCY_SIGN + r")(?<!" + _CURRENCY_SIGN + r"\s)(?:" + _AMOUNT + r")"
     + _MAGNITUDE + r"\s?" + _CURRENCY_SIGN + r"(?!\s?\d)", _CURRENCY_SIGN),
]
# An amount in CJK magnitudes with no currency: only with 万/亿/만/억 in it ("2.5万", "1万2千").
_CJK_BARE_AMOUNT = r"(?:" + _AMOUNT + r")" + _CJK_MAGNITUDES
_CJK_BIG_MAGNITUDE = re.compile("[万亿만억]")
# A money match never ends where ".digit" or ",digit" goes on: "$2.5" must not shrink to "$2",
# nor "₹1,50,000" to "₹1".
_MONEY_END = r"(?![A-Za-z0-9]|[.,]\d)"

_PHONES = [
    r"(?:\+?86[- ]?)?1[3-9]\d(?:[- ]?\d{4}){2}",
    # An area code in brackets ("(555) 123-4567", "(03) 1234-5678", "(02) 9876 5432").
    r"\(\d{2,4}\)\s?\d{3,4}[- ]\d{4}",
    r"\d{3}-\d{3}-\d{4}",
    r"\d{3}[ .]\d{3}[ .]\d{4}",
    r"0\d{2,3}-\d{7,8}",
    r"[48]00-\d{3}-\d{4}",
    # A North American local number ("555-0142"): exchange codes never start with 0 or 1. Not
    # glued to more digits by a hyphen, so a piece of a longer number is never one.
    r"(?<!\d-)[2-9]\d{2}-\d{4}(?!-\d)",
]
# An international number: a country code, perhaps an area code in brackets, then groups as
# each country writes them ("+91 98765 43210", "+33 1 23 45 67 89", "+49 30 12345678",
# "+7 (495) 123-45-67"); ``_is_international_phone`` checks the length E.164 allows.
_INTERNATIONAL_PHONE = (r"\+\d{1,3}[ -]?(?:\(\d{1,4}\)[ -]?)?\d{1,14}(?:[ -]\d{2,8}){0,5}")
# A national number with a trunk 0 in groups ("020 7946 0958", "07700 900123",
# "01 23 45 67 89", "030 12345678"): the pattern takes any grouping, ``_is_national_phone`` the
# length.
# A German-style number writes the subscriber in one group after the area code ("030 12345678").
_NATIONAL_PHONE = r"0\d{1,5}(?:(?:[ -]\d{2,6}){1,4}|[ -]\d{7,8})"

# A UK postcode: outward code (area, district, sub-district) and inward code, with the letters
# the Royal Mail allows in each place; without a space it is already an id-like code.
_UK_POSTCODE = (r"[A-PR-UWYZ](?:\d[A-HJKPSTUW]|[A-HK-Y]\d[ABEHMNPRVWXY]|[A-HK-Y]?\d{1,2})"
                r" ?\d[ABD-HJLNP-UW-Z]{2}")

# An IBAN, written in groups of four as banks print it ("DE89 3704 0044 0532 0130 00"): one
# code, not a run of small numbers; ``_is_iban`` checks its length and check digits.
_IBAN = _A + r"[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?" + _Z

# A version: "v" and two or more parts, or three or more parts bare (two bare parts are a
# decimal), then perhaps a pre-release and build metadata as semantic versioning writes them.
# A bare dotted run is also a number; the version wins when it is longer.
_VERSION = (r"(?<![A-Za-z0-9.])(?:[vV]\d+(?:\.\d+)+|\d+(?:\.\d+){2,})"
            r"(?:-(?i:alpha|beta|rc|dev|pre|preview|snapshot|nightly)(?:[.-]?\d+)*)?"
            r"(?:\+[0-9A-Za-z]+(?:\.[0-9A-Za-z]+)*)?(?![A-Za-z0-9]|\.\d)")

_ROAD_TYPES = ("Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Parkway|Pkwy|"
               "Highway|Hwy")
_STREET_TYPES = _ROAD_TYPES + "|Way|Court|Ct|Place|Pl|Square|Sq|Terrace|Circle|Plaza"
_NAME_WORD = r"[A-Z][A-Za-z'-]*\s"
# A numbered street ("5th Ave", "W 23rd St") takes only road types: "2 1st Place finishes"
# and the like are prose, not addresses.
_STREET = (r"(?:(?:" + _NAME_WORD + r"){1,4}(?:" + _STREET_TYPES + r")|(?:" + _NAME_WORD
           + r"){0,2}\d{1,3}(?:st|nd|rd|th)\s(?:" + _ROAD_TYPES + r"))")
_EN_ADDRESS = (
    r"\d{1,6}[A-Za-z]?\s(?:[NSEW]\.?\s)?" + _STREET + r"\.?" + _Z
    + r"(?:\s(?:[NS][EW]|[NSEW])" + _Z + r")?"
    + r"(?:,?\s(?:Apt|Apartment|Suite|Ste|Unit|Floor|Fl|Room|#)\.?\s?#?[A-Za-z0-9-]+)?"
    r"(?:,\s[A-Z][a-z]+(?:\s[A-Z][a-z]+){0,2}(?:,\s[A-Z]{2})?"
    r"(?:\s(?:\d{5}(?:-\d{4})?|" + _UK_POSTCODE + r"))?)?"
)

_CJK = rf"[{cjk_class(HAN)}]"
_ZH_ADMIN = r"(?:省|自治区|特别行政区|市|自治州|地区|区|县|旗)"
# Atomic groups (?>…): a segment, once matched, is never re-split; without them a long run of
# suffix characters ("路路路…") makes the pattern backtrack exponentially.
_ZH_ROADS = r"大道|路|街|巷|弄|胡同"
_ZH_PLACE = (r"(?>" + _CJK + r"{1,10}?(?:" + _ZH_ADMIN[3:-1] + r"|镇|乡|街道|段|" + _ZH_ROADS
             + r"))")
# A space may stand around a number ("文三路 88 号", "3 号楼 1201 室"): typed that way often.
_ZH_GAP = r"[ \t\u3000]?"
_ZH_UNIT = (r"(?:" + _ZH_GAP + r"\d+" + _ZH_GAP + r"(?:号楼|号院|栋|幢|座|单元|层|楼|室|号)"
            r"|" + _ZH_GAP + r"[A-Za-z]座)")
_ZH_ADDRESSES = [
    r"(?:" + _ZH_PLACE + r"){1,6}" + _ZH_GAP + r"(?:\d+|[一二三四五六七八九十百零]+)" + _ZH_GAP
    + r"(?:号楼|号院|号|弄|栋|幢|座)" + _ZH_UNIT + "*",
    # No house number: at least two administrative levels, and perhaps the road.
    r"(?>" + _CJK + r"{2,8}?" + _ZH_ADMIN + r"){2,4}"
    r"(?>(?![的了是在和])" + _CJK + r"{1,6}?(?:" + _ZH_ROADS + r"))?",
]

# Words that end the lead-in before an address ("寄到", "地址是") rather than belong to it.
_ZH_LEAD_INS = ("一下", "寄到", "送到", "发到", "寄往", "送往", "发往", "运到", "住在", "位于",
                "地址", "改为", "改成", "换成", "到", "在", "是", "为", "往", "至", "从", "去",
                "把", "的", "了", "我", "你", "他", "她", "们", "问", "查", "和", "或", "及")
# In the folded (Simplified) form: "臺北" is "台北" once folded.
_ZH_KNOWN_PLACES = tuple(
    "北京 天津 上海 重庆 河北 山西 辽宁 吉林 黑龙江 江苏 浙江 安徽 福建"
    " 江西 山东 河南 湖北 湖南 广东 海南 四川 贵州 云南 陕西 甘肃 青海"
    " 台湾 内蒙古 广西 西藏 宁夏 新疆 香港 澳门 广州 深圳 杭州 南京 苏州"
    " 成都 武汉 西安 长沙 郑州 青岛 厦门 宁波 大连 沈阳 济南 合肥 福州"
    " 昆明 哈尔滨 长春 石家庄 太原 南昌 南宁 贵阳 兰州 海口 无锡 东莞 佛山 珠海"
    " 台北 新北 桃园 台中 台南 高雄 基隆 新竹 嘉义".split()
)

_ID_KEYWORDS = (
    # Each Chinese keyword stands alone as its English one does ("订单 #A1B2C3", "order #A1B2C3").
    # Chinese as folded (Traditional "訂單編號" reads "订单编号"), then Japanese and Korean.
    r"(?i:订单(?:号|编号)?|单号|编号|工单号?|预订号?|预约号?|确认(?:号|码)|票号|航班号?|快递单号"
    r"|运单号|物流单号|追踪号|参考号|注文番号|予约番号|确认番号|追跡番号|伝票番号"
    r"|주문\s?번호|예약\s?번호|송장\s?번호|확인\s?번호"
    r"|order(?:\s(?:id|number|no\.?))?|reservation(?:\s(?:id|number|code))?"
    r"|booking(?:\s(?:id|number|code|reference))?|confirmation(?:\s(?:code|number))?"
    r"|ticket(?:\s(?:id|number))?|tracking(?:\s(?:id|number|no\.?))?|case(?:\s(?:id|number))?"
    r"|reference(?:\s(?:id|number|code))?|flight(?:\s(?:number|no\.?))?)"
)
_KEYED_ID = (_ID_KEYWORDS + r"\s?(?:(?i:is|was)\s|为|是|は|는|은|:|#|=)?\s?#?(" + _A
             + r"[A-Za-z0-9][A-Za-z0-9_-]{3,})" + _Z)
# The lookahead (a digit before the token ends) keeps plain words from reaching ``_is_code``.
_CODE = _A + r"(?<![_#-])(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*" + _Z
# An id whose parts are joined by slashes, as invoices and case files are numbered
# ("INV/2024/00123", "FV/2024/03/0012", "GST/23-24/0042"): one value, never its pieces.
# It opens with a letter and not inside a path ("/srv/backups/2024/001" stays numbers), and
# ``_is_slashed_id`` wants a number of three or more digits in it ("TCP/IP", "km/h" and
# "api/v2/users" are none).
_SLASHED_ID = (r"(?<![A-Za-z0-9/._-])[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*"
               r"(?:/[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*){1,6}" + _Z + r"(?!/)")
# A dotted run of numbers (IP address, version: "192.168.1.1", "10.0.19045") is one number; a
# number never ends where ".digit" goes on, so no piece ("192.168") of one is a fact of its own.
# A piece of a grouped number is never one of its own: no number starts right after a digit
# and a no-break, thin or apostrophe group separator ("12\u00a0500" has no "500").
_NUMBER = (r"(?<![A-Za-z0-9.,])(?<!\d[\u00a0\u202f\u2009'’])(?:\d+(?:\.\d+){2,}|(?:"
           + _NUMBER_FORMS + r")%?)(?![A-Za-z0-9]|\.\d)")

# Digits joined by hyphens ("555-01162", "123-45-6789", "10001-1234"): one number, unless
# ``_is_hyphenated_number`` reads it as a range. Not part of a dotted, comma-grouped or
# hyphenated token (a code such as "ORD-2024-001" is the code rule's).
_HYPHENATED = r"(?<![A-Za-z0-9.,_-])[0-9]+(?:-[0-9]+)+(?![A-Za-z0-9_]|[.,-][0-9])"

# A number in three or more groups of dots or slashes that ends in hyphenated check digits, as
# Brazil writes a CPF ("123.456.789-09") or a CNPJ ("12.345.678/0001-90"), or a dated reference
# ("2024/03/15-001"): one value. Without this rule the check digits fell off ("123.456.789"
# was the fact), so a summary that changed them passed.
_CHECKED_NUMBER = (r"(?<![A-Za-z0-9.,/_-])\d+(?:[./]\d+){2,}(?:-\d+)+"
                   r"(?![A-Za-z0-9_]|[.,/-]\d)")
_URL_TAIL = ".,;:!?)]}'\""
_ORDINAL = re.compile(r"\d+(?:st|nd|rd|th)")

# Full-width ASCII letters, digits and the symbols ids use, folded one character to one so
# that match positions in the folded text are positions in the original.
_FOLD = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)
         if chr(code - 0xFEE0).isalnum() or chr(code - 0xFEE0) in "@#$%+-./:_"}
_FOLD[0x3000] = 0x20
# Traditional Chinese characters the patterns name, read as their Simplified forms (one to
# one, so positions hold): "¥1.2萬元", "12月3號晚上8點半", "臺北市信義區", "訂單編號" match as the
# Simplified text does. The Japanese forms among them ("午後3時", "確認番号") fold the same way.
_TRADITIONAL = ("萬万億亿塊块錢钱點点號号區区縣县鄉乡鎮镇樓楼層层棟栋單单訂订編编遞递運运"
                "預预確确認认碼码約约蹤踪參参歐欧鎊镑幣币圓圆臺台灣湾園园義义門门後后時时"
                "間间發发於于為为換换們们問问從从別别")
_FOLD.update({ord(old): ord(new) for old, new in zip(_TRADITIONAL[::2], _TRADITIONAL[1::2],
                                                      strict=True)})


@dataclass(frozen=True, slots=True, kw_only=True)
class _Rule:
    """One kind of fact: a pattern, the group that is the fact and a check of the match."""

    kind: str
    """What the fact is (url, email, date, …); ties between equally long matches go to the
    rule listed first."""
    pattern: re.Pattern[str]
    """Compiled pattern run over the folded text."""
    group: int = 0
    """The capture group holding the fact (0: the whole match)."""
    accept: Callable[[str], bool] = lambda _: True
    """Rejects matches the pattern cannot rule out on its own."""
    gate: re.Pattern[str] | None = None
    """A cheap pattern the text must contain for the rule to be worth running at all."""


def _is_code(token: str) -> bool:
    """An id-like token: letters and digits mixed, long enough not to be a unit or ordinal."""
    alnum = sum(ch.isalnum() for ch in token)
    has_digit = any(ch.isdigit() for ch in token)
    has_alpha = any(ch.isalpha() for ch in token)
    return has_digit and has_alpha and alnum >= 4 and not _ORDINAL.fullmatch(token)


def _is_slashed_id(token: str) -> bool:
    """A slash-joined id: one of its parts is a number of three or more digits."""
    return any(len(part) >= 3 and part.isdigit()
               for piece in token.split("/") for part in piece.split("-"))


def _is_keyed_id(token: str) -> bool:
    """After "order number" and the like: any token with a digit, or an upper-case code."""
    return any(ch.isdigit() for ch in token) or (token.isupper() and len(token) >= 4)


def _is_iban(token: str) -> bool:
    """15 to 34 characters whose ISO 13616 check (mod 97) holds: groups rarely pass by chance."""
    compact = token.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(ch, 36)) for ch in rearranged)) % 97 == 1


def _has_three_digits(token: str) -> bool:
    return sum(ch.isdigit() for ch in token) >= 3


def _has_six_digits(token: str) -> bool:
    # "1.2.3-4" (a version and a step) is no such number; the shortest checked ids have more.
    return sum(ch.isdigit() for ch in token) >= 6


def _is_hyphenated_number(token: str) -> bool:
    """A hyphenated number that is one value: not a range, and holding a fact-sized group.

    A group of three or more digits is required, so joining never makes a fact of text that had
    none ("3-2", "0-60"). Two groups read as a range ("1990-2000", "100-200": each number its
    own fact) when neither starts with 0 and the second is above the first but within ten
    times it; a leading zero ("555-01162"), a falling pair or a third group is one value.
    """
    groups = token.split("-")
    if max(len(group) for group in groups) < 3:
        return False
    return len(groups) > 2 or not _is_range(groups[0], groups[1])


def _is_range(low: str, high: str) -> bool:
    """Whether ``low-high`` (ASCII digits) reads as a range: rising, of one magnitude.

    Compared as strings, so a number of any length is read (``int`` refuses very long ones).
    """
    if low.startswith("0") or high.startswith("0"):
        return False
    if len(high) == len(low):
        return high > low
    return len(high) == len(low) + 1 and high <= low + "0"


def _is_international_phone(token: str) -> bool:
    """Seven to fifteen digits, country code included (E.164 allows fifteen at most)."""
    return 7 <= sum(ch.isdigit() for ch in token) <= 15


def _has_big_magnitude(token: str) -> bool:
    """An amount in CJK magnitudes without a currency: 万, 亿, 만 or 억 in it."""
    return _CJK_BIG_MAGNITUDE.search(token) is not None


def _is_national_phone(token: str) -> bool:
    """Nine to eleven digits: a whole national number, not a run of small numbers."""
    return 9 <= sum(ch.isdigit() for ch in token) <= 11


_DIGIT = re.compile(r"\d")
_HAN = re.compile(_CJK)
_HANGUL = re.compile(f"[{cjk_class(('hangul',))}]")


def _rules() -> tuple[_Rule, ...]:
    # Gates skip rules that cannot match: most chat text has no digit, no "@", no Chinese.
    def many(kind: str, patterns: list[str], gate: re.Pattern[str] = _DIGIT) -> list[_Rule]:
        return [_Rule(kind=kind, pattern=re.compile(p), gate=gate) for p in patterns]

    return (
        _Rule(kind="url", pattern=re.compile(_URL), gate=re.compile(r"://|www\.")),
        _Rule(kind="email", pattern=re.compile(_EMAIL), gate=re.compile("@")),
        *many("address", [_EN_ADDRESS]),
        *many("address", _ZH_ADDRESSES, _HAN),
        *many("money", [_A + p + _MONEY_END for p in _SIGNED_MONEY]),
        *(_Rule(kind="money", pattern=re.compile(_AMOUNT_START + p + _MONEY_END),
                gate=re.compile(gate)) for p, gate in _MONEY_BEFORE_CURRENCY),
        _Rule(kind="money", pattern=re.compile(_AMOUNT_START + _CJK_BARE_AMOUNT + _MONEY_END),
              accept=_has_big_magnitude, gate=_CJK_BIG_MAGNITUDE),
        *many("phone", [_A + p + _Z for p in _PHONES]),
        _Rule(kind="phone", pattern=re.compile(_A + _INTERNATIONAL_PHONE + _Z),
              accept=_is_international_phone, gate=re.compile(r"\+")),
        _Rule(kind="phone", pattern=re.compile(_A + _NATIONAL_PHONE + _Z),
              accept=_is_national_phone, gate=_DIGIT),
        *many("postcode", [_A + _UK_POSTCODE + _Z]),
        *many("date", [_A + p + _Z for p in _DATES[:-1]]),
        *many("date", [_A + _DATES[-1] + _Z], _HAN),
        *many("date", [_A + p + _Z for p in _KO_DATES], _HANGUL),
        *many("version", [_VERSION]),
        _Rule(kind="id", pattern=re.compile(_KEYED_ID), group=1, accept=_is_keyed_id),
        _Rule(kind="code", pattern=re.compile(_IBAN), accept=_is_iban,
              gate=re.compile(r"[A-Z]{2}\d{2}")),
        _Rule(kind="code", pattern=re.compile(_CODE), accept=_is_code, gate=_DIGIT),
        _Rule(kind="code", pattern=re.compile(_SLASHED_ID), accept=_is_slashed_id,
              gate=re.compile(r"[A-Za-z][A-Za-z0-9-]*/")),
        _Rule(kind="number", pattern=re.compile(_HYPHENATED), accept=_is_hyphenated_number,
              gate=_DIGIT),
        _Rule(kind="number", pattern=re.compile(_CHECKED_NUMBER), accept=_has_six_digits,
              gate=re.compile(r"\d[./]\d+-\d")),
        _Rule(kind="number", pattern=re.compile(_NUMBER), accept=_has_three_digits,
              gate=_DIGIT),
    )


_RULES = _rules()


def fact_key(text: str) -> str:
    """The form facts are compared in: NFKC (full-width folded), whitespace removed."""
    return "".join(unicodedata.normalize("NFKC", text).split())


def extract_facts(text: str) -> tuple[str, ...]:
    """Exact facts in ``text``, in order of first appearance, each once, as written.

    Where matches overlap the longer one wins (``¥1,299.00`` over ``1,299``; an address over
    the house number in it), so a fact is never reported together with a piece of itself.
    """
    if len(text) <= _CACHED_CHARS:
        return _extract_cached(text)
    # A long text (a pasted log, a fetched page) is read by a summary merge, its check and the
    # rules of the user's statements, up to eight times: remembered by its digest, it is read
    # once and the text is not kept. Facts too many for the cache's bound (thousands) are not
    # remembered, and such a text is read again.
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    found = _LONG_TEXTS.lookup(digest)
    return found if found is not None else _LONG_TEXTS.put(digest, _extract(text))


_CACHED_CHARS = 20_000
_LONG_TEXTS: BoundedCache[bytes, tuple[str, ...]] = register_cache(
    "compress.facts.extract_long", BoundedCache(
        "compress.facts.extract_long", max_entries=256, share=0.005,
        size=lambda _, facts: 16 + sum(map(text_bytes, facts)) + 60 * len(facts)))


# A time of day on its own ("7:30pm", "8 PM", "下午3:30", "晚上8点") is a time, not a date: a
# correction to "8:30pm" replaces the time said before, never the day.
_TIME_ONLY = re.compile(r"(?:" + _DAYPART + r"\s?)?(?:" + _CLOCK
                        + r"|\d{1,2}\s?(?:[AaPp][Mm]|[AaPp]\.[Mm]\.)|" + _CJK_HOUR + r")|"
                        + _KO_TIME)


def fact_kind(fact: str) -> str:
    """What kind of value ``fact`` is on its own, as ``extract_facts`` reads it.

    One of ``url``, ``email``, ``address``, ``money``, ``phone``, ``postcode``, ``date``,
    ``time``, ``version``, ``id``, ``code``, ``number``; '' when ``fact`` is not one whole fact.
    """
    return _kind_cached(fact) if len(fact) <= _CACHED_CHARS else _kind(fact)


@memoized("compress.facts.kind", max_entries=4096, share=0.01, size=call_bytes)
def _kind_cached(fact: str) -> str:
    # A correction compares a new value with every fact said before, merge after merge.
    return _kind(fact)


def _kind(fact: str) -> str:
    folded = fact.strip().translate(_FOLD)
    whole = [index for start, end, index in _candidates(folded)
             if start == 0 and end == len(folded)]
    if not whole:
        return ""
    kind = _RULES[min(whole)].kind  # ties go to the rule listed first, as in extraction
    return "time" if kind == "date" and _TIME_ONLY.fullmatch(folded) else kind


@memoized("compress.facts.extract", max_entries=4096, share=0.015, size=call_bytes)
def _extract_cached(text: str) -> tuple[str, ...]:
    # A summary merge and its check both read the same messages; remember short texts only,
    # so the cache stays small (4,096 × 20,000 characters at the very most).
    return _extract(text)


# The library's own framing, as ``core.fence`` and the renderings write it: fence lines
# (``<<data 6d237235dad1 tool get_weather>>``, ``<<end 6d237235dad1>>``) and the marker of a
# recalled turn. A model that copies them into its answer or a tool argument must not turn
# them into facts a summary keeps for ever. A copy may carry the escape ``neutralise`` puts in
# a fence line quoted inside data (``<\<end …>>``), full-width brackets (``＜＜end …＞＞``) or
# another case (``<<END …>>``).
_LT = "[<\ufe64\uff1c]"
_GT = "[>\ufe65\uff1e]"
# A head's label is any text ``core.fence`` lets through (``_safe_label``): one line, where a `>`
# may stand alone (``Help Center > Refunds``) but never right before another, except a last one
# before the closing ``>>``. A label that quotes another fence line's opening is matched from
# that opening on: scanning on past it could make the search quadratic in hostile text.
_OPENING_AFTER_LT = r"\\?" + _LT + r"(?:data|end) [0-9a-f]{12}"
_PLAIN = r"[^\n<>\ufe64\uff1c\ufe65\uff1e]*"
_LABEL = (_PLAIN + r"(?:(?:" + _LT + r"(?!" + _OPENING_AFTER_LT + r")|" + _GT + r"(?!" + _GT
          + r"))" + _PLAIN + r")*" + _GT + "?")
# A recalled turn's marker takes the speaker label a transcript writes next to it ("User:
# [recalled 2024-05-01]", "[recalled] user: …"): the label is the rendering's, not the turn's.
_SPEAKER = r"(?:user|assistant|tool|system|用户|助手|工具|系统)\s?[:：]"
_RECALLED = (r"(?:(?<![^\W\d_])" + _SPEAKER + r"[ \t]*)?\[recalled(?: [0-9T:+\-Z.]{4,40})?\]"
             r"(?:\s*" + _SPEAKER + r")?")
_FRAMING = re.compile(_LT + r"\\?" + _LT + r"(?:data [0-9a-f]{12}" + _LABEL
                      + r"|end [0-9a-f]{12})" + _GT + _GT + r"|" + _RECALLED, re.IGNORECASE)
_MARKER_SHAPE = re.compile(r"[0-9a-f]{12}")


def looks_like_fence_marker(fact: str) -> bool:
    """Whether ``fact`` has the shape of a fence marker, bare or in its fence line.

    Bare (12 lower-case hex digits), callers drop it when only the model wrote it (an answer, a
    tool argument) and no user or tool message holds it: then it is the fence of an earlier
    context copied back. A value that is nothing but framing (``<<end 0123456789ab>>``, a
    recalled-turn marker) never comes out of ``extract_facts``, so no message grounds it.
    """
    return _MARKER_SHAPE.fullmatch(fact) is not None or (
        fact.strip() != "" and without_framing(fact).strip() == "")


def without_framing(text: str) -> str:
    """``text`` without the library's fence lines and recalled-turn markers (for quoting)."""
    if not _may_frame(text):
        return text
    return _FRAMING.sub("", text)


def _may_frame(text: str) -> bool:
    """A quick test that ``text`` may hold framing (most texts hold no bracket at all)."""
    return "[recalled" in text or any(opening in text for opening in _OPENINGS)


_OPENINGS = ("<<", "<\\<", "\ufe64", "\uff1c")


def _without_framing(text: str) -> str:
    """``text`` with the library's framing blanked out (same length, so offsets still hold)."""
    if not _may_frame(text):
        return text
    return _FRAMING.sub(lambda m: " " * len(m.group()), text)


def _extract(text: str) -> tuple[str, ...]:
    folded = _without_framing(text).translate(_FOLD)
    spans = _best_spans(_candidates(folded))
    facts: dict[str, str] = {}
    for start, end in spans:
        fact = text[start:end].strip()
        if _by_a_number_part(folded, start, end) and missing_facts(text, (fact,)):
            continue  # only a piece of a number here ("00A0" of "00A0.1"): no fact
        facts.setdefault(fact_key(fact), fact)
    return tuple(facts.values())


def _by_a_number_part(folded: str, start: int, end: int) -> bool:
    """Whether a decimal point touches the span: it may be a piece of a number.

    Only a point: "1234,5678" reads as a list of two ids as often as a number, and its first
    id stays a fact.
    """
    return folded[end:end + 1] == "." or folded[start - 1:start] == "."


def inside_facts(text: str) -> bytearray:
    """Per position of ``text``: 1 where a cut would split an exact fact ``extract_facts`` finds."""
    inside = bytearray(len(text) + 1)
    for fact in extract_facts(text):
        start = text.find(fact)
        while start != -1:
            inside[start + 1:start + len(fact)] = b"\x01" * (len(fact) - 1)
            start = text.find(fact, start + 1)
    return inside


def missing_facts(summary_text: str, required: Iterable[str]) -> tuple[str, ...]:
    """The required facts ``summary_text`` does not contain, in the order given, each once.

    A fact is found when it occurs in the text with whitespace removed and character width
    folded on both sides; nothing else is forgiven (``ORD-2024-001`` is not ``ORD-2024-002``,
    case matters for ids). It must occur as itself, not as a piece of a different value: no
    ASCII letter or digit may touch it, nor a decimal or thousands part go on from it, so
    ``$120`` does not hold ``$12`` and ``ORD-10012`` does not hold ``ORD-1001``. Zero cents are
    the same amount: ``¥1,299.00`` holds ``1,299``.
    """
    haystack, breaks = _compacted(summary_text)
    missing: dict[str, str] = {}
    for fact in required:
        key = fact_key(fact)
        if key and not _occurs_whole(haystack, breaks, key):
            missing.setdefault(key, fact)
    return tuple(missing.values())


def _compacted(text: str) -> tuple[str, bytearray]:
    """``fact_key(text)`` and, per position, whether whitespace stood there (a word break)."""
    pieces = unicodedata.normalize("NFKC", text).split()
    compact = "".join(pieces)
    breaks = bytearray(len(compact) + 1)
    position = 0
    for piece in pieces:
        breaks[position] = 1
        position += len(piece)
    breaks[position] = 1
    return compact, breaks


_ASCII_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_GOES_ON_AFTER = re.compile(r"[.,](?!0+(?![0-9]))[0-9]")
"""A decimal or thousands part after a value (".5", ",000"), but not zero cents (".00")."""


def _occurs_whole(haystack: str, breaks: bytearray, key: str) -> bool:
    """Whether ``key`` occurs in ``haystack`` with no other value's characters around it."""
    start = haystack.find(key)
    while start != -1:
        end = start + len(key)
        if _clean_edge_before(haystack, breaks, start, key) and _clean_edge_after(
                haystack, breaks, end, key):
            return True
        start = haystack.find(key, start + 1)
    return False


def _clean_edge_before(haystack: str, breaks: bytearray, start: int, key: str) -> bool:
    if breaks[start] or key[0] not in _ASCII_ALNUM:
        return True
    before = haystack[start - 1]
    if before in _ASCII_ALNUM:
        return False
    # "1,299" in "21,299" or "5" in "1.5": a piece of a longer number.
    return not (before in ".," and start >= 2 and haystack[start - 2].isdigit()
                and not breaks[start - 1] and key[0].isdigit())


def _clean_edge_after(haystack: str, breaks: bytearray, end: int, key: str) -> bool:
    if breaks[end] or key[-1] not in _ASCII_ALNUM:
        return True
    if haystack[end] in _ASCII_ALNUM:
        return False
    return not (key[-1].isdigit() and _GOES_ON_AFTER.match(haystack, end) is not None
                and not breaks[end + 1])


def _candidates(folded: str) -> list[tuple[int, int, int]]:
    """Every accepted match as ``(start, end, rule index)``."""
    found: list[tuple[int, int, int]] = []
    gates: dict[re.Pattern[str], bool] = {}
    for index, rule in enumerate(_RULES):
        if rule.gate is not None:
            if rule.gate not in gates:
                gates[rule.gate] = rule.gate.search(folded) is not None
            if not gates[rule.gate]:
                continue
        for match in rule.pattern.finditer(folded):
            start, end = match.span(rule.group)
            start, end = _trim(rule.kind, folded, start, end)
            if end > start and rule.accept(folded[start:end]):
                found.append((start, end, index))
    return found


def _best_spans(candidates: list[tuple[int, int, int]]) -> list[tuple[int, int]]:
    """Longest matches first (ties: earlier rule, then earlier start), none overlapping."""
    if not candidates:
        return []
    used = bytearray(max(end for _, end, _ in candidates))
    taken: list[tuple[int, int]] = []
    for start, end, _ in sorted(candidates, key=lambda c: (c[0] - c[1], c[2], c[0])):
        if used.find(1, start, end) == -1:
            used[start:end] = b"\x01" * (end - start)
            taken.append((start, end))
    return sorted(taken)


def _trim(kind: str, text: str, start: int, end: int) -> tuple[int, int]:
    """Cut what a pattern had to swallow but is not part of the fact."""
    if kind == "url":
        while end > start and text[end - 1] in _URL_TAIL and not _closes_in(text, start, end):
            end -= 1
    elif kind == "address" and is_cjk_char(text[start], HAN):
        start = _address_start(text, start, end)
    elif kind == "address" and text[end - 1] == ".":
        # The pattern takes "St." whole to read on to ", Apt 4"; a final full stop ends the
        # sentence as often as it abbreviates, and a fact without it is found in either text.
        end -= 1
    return start, end


_OPENER = {")": "(", "]": "[", "}": "{"}


def _closes_in(text: str, start: int, end: int) -> bool:
    """Whether the bracket ending ``text[start:end]`` closes one opened inside it.

    Such a bracket is the URL's own (``…/wiki/Mercury_(planet)``); an unmatched one closes the
    prose around the URL ("(see https://ex.com/a)").
    """
    opener = _OPENER.get(text[end - 1])
    if opener is None:
        return False
    span = text[start:end]
    return span.count(opener) >= span.count(text[end - 1])


def _address_start(text: str, start: int, end: int) -> int:
    """Where a Chinese address really begins inside a match that may carry a lead-in.

    The pattern cannot tell "寄到北京市" from a place name, so: a known province or city name
    starts the address; failing that, the address starts after the last lead-in word.
    """
    span = text[start:end]
    known = [span.find(name) for name in _ZH_KNOWN_PLACES if 0 <= span.find(name) < 8]
    if known:
        return start + min(known)
    head = span[:10]
    cut = max((head.rfind(word) + len(word) for word in _ZH_LEAD_INS if word in head), default=0)
    return start + cut


register_cache("compress.facts.extract", _extract_cached)
register_cache("compress.facts.kind", _kind_cached)
