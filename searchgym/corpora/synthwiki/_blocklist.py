"""Real words that the synthwiki name grammar could produce (see :mod:`.names`).

The list is every word of the wiki-vital vocabulary (lowercased ``[a-z]+`` runs of the
titles and lead summaries of the 10,033 vital Wikipedia articles) that
:func:`searchgym.corpora.synthwiki.names.could_generate` accepts. When the grammar
changes, ``tests/corpora/test_synthwiki.py`` prints the words to add.
"""

BLOCKED_WORDS = """
baden badrinath bahamas bala balard balkaria bamako bamar bambara bambino banana bananas banda
bandar bandura barbara barbuda baroda bartolo basava basel batavia bavaria belluno belmondo belo
benda beno berar berek beria bermuda bernard bernardo besan betula betularia bezalel bidar biko
bimbisara bindusara binisay binomen bipolar bisay bivalvia bohemia bokor bolero bolivia
bordelais borno borrelia brando branzino bravo bremen brendan brigida broken brothel brotulas
brunel bruno bulgaria bulimia burden burkina burlador busan butana dada dakar daman damaso dano
daro dededo delano delay demidova dena denisova denpasar depero deronda derrida desert desia
devan diderik dido dinanath dinas dinesen disproven divan divert divina divisor dodo dogado
dogana doma domino dona donar donen donor dora dorado drama dramas driven dulia duma duman dumas
fano fantasia faraday faria faso fatima fava favor fela femina fernando fibula fidel figaro
fireman folivora foremost formosa formula formulas fula fulani futana futuna galago galen
galleria galvani gama gamelan ganesh gara garden gardenia garima gathas gavia gaviria gavrilo
geisel gelada gemara genera geneva genevan gerais gerakan germania gila gilgamesh gino giray
giro gisela gitano given godard gomera gondar gondola gonzalo gopala gopinath gorda gorenko
governor govinda granada granular gravel grenada grendel gular gustavo habana hadamard hadith
halo hamar hamas handel hanuman hara hargeisa harun hasan hasani hathor havana havel haven
hedera heizaka helen helena hema henan hera heredia hernando hero hirundo hisar hispania
historia holiday homo honda hondo honduras honor horeiva horseman horsemen human humani humor
hunan husayn kabila kadesh kaduna kahana kala kalika kama kamerun kamo kampala kana kanas kandel
kanesh kannada kano kapila kara karelia karen kasenda katana kavakava kazimir keiko kerala
kernel kilo kinda kisa kogoro kokoro kola komodo koran korsakova kosovo krasnodar kunika kuniya
kura kussara kutha labrador ladas laden ladino lagenaria lama lamina laminar laren larisa
larkana lateran latina lava lavo leiden lema lena lenana lesotho level liberia libido liguria
lila lilith lima linda linen lingala lisa lisan livadia livia livonia lobelia lola loman loren
lothar lovisa ludovic lumen luna lunar lupino lusaka lutheran mada madeira madera madero
madrasas madura mahathir mahavira makani mako makuria malard malaria malay malik malva mama
mamar mammalia mamor manama mandalay mandela mandola mania manila manthana manzano manzarek
manzikert mara maratha maria marina marino marmara marmora maro marrakesh martina mathura matola
mazara medan media medina medusa megadeth megalith mela melaka melo mena menander mendel menelik
meninas menura meredith meriden merina merino mero mesa mesas messina mika mikado miko milan
millikan milo mimar mimika mimosa minas minima minor minora minun miranda mishima miso mistaken
mobula model modular mohandas mola molar moldavia moldova molina moma mombasa mona monday
mongolia mono monolith monrovia montana montuno moralia moravia mordovia moreno morula muda
mulan mulliken muntenia muntilan musa musala mustela nadia nagorno nalanda nanda nano nara
narnia nasa nasir naso natura nazareth nebula nebular negara neisseria nemo nero neruda neva
nevada nidas nigeria nikola nikolay nilo nintendo niro nirvana nolan noma nomex nonhuman
nonpolar nonzero norsemen nova novas novel novella novo numa numidia nunavik nusa pagoda pagodas
palais palomar pamir panama panda pandan panel panina pannonia panthera para paran pardo
parganas partisan paso patara pavel pavia pavo pavonia pelo penida penniman pera pereira persona
peso pika pikas pilosa pimpernel pindar pinelli pira pirna pisa pisan pithora podor pola polar
polo poltava pomelo pompano popular pradesh prado pretoria prima primera pristina promo prospero
protolith protura proven pulasa puma puna puranas purna rabelais rada radama radar radula rahina
rama ramadan raman ramana ramavo rambola ramesh rano rashidun ravel raven ravenna regalia
regimen regolith regular reina relay remora remoras renan resund retina ribeiro rida rila risala
risen rivera roda roma roman romana romani romania romano romola ronia rosa rotunda rugula runa
rurik russolo ruthenia sabana sabara sado sagrada sagrado sahara saharan sakas salamander salar
salas salavan salento saliva salmonella salvador salvia samar samara samaria samo samora sanda
sandia sangama sankara saramago sardar sardinia sarnath saro sarovar sasan sativa saturday sava
seikan seko semen seminar sentinel serena seria serna sevan seven seventh siberia sida sidama
silas silesia silo silva sima similar sina sinan singamen singular sinhala sino siren sirenia
skamania soda sola solar solidago solo solvay somalia sonar sonora sonoran soprano sovana
stalino stamina standard stefano steven stika stolen stoma suda sudan sudeva sukarno sula
suleiman sullivan sumo sunda sunday supernova survivor susa susan suva tabular taken taman tamar
tana tania tanzania taras taro tasmania tataria tempura tenkara tenor teresa termina tezuka
thanda thanesar tharaka thelema theresa thomas thunar thunor tilia timor tirana tirel titania
titano titular today token toledo toliman tommaso tonino tornado torpedo tosa toshiro travel
tremolo tremor tripura truman tubular tudor tuka tulsidas tuluva tuman tumen tumor tuna tunguska
tunisia turan turbinia turia turkana turkoman vadodara vagina valera valor valpara valva
valvular vanir vara varda varna vasa veda vedas velar vendor ventana vera veran verano verbena
verdun veteran viharas vila vipera virginia visa vistula vivar vondel vulva zadek zakariya zama
zamia zara zeila zenas zenith zermelo zero zola zona zulia
"""
