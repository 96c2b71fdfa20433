from rag_core import RAG_PLACEHOLDER, Topic, format_rag, replace_rag_placeholder


def test_rag_text_is_title_summary_and_separator_per_topic():
    topics = [
        Topic(source="a", title="Parking", summary="Garage under the building."),
        Topic(source="b", title="Pets", summary="Dogs welcome.\nOn a leash."),
    ]
    assert format_rag(topics) == (
        "Parking\nGarage under the building.\n\n---\n\nPets\nDogs welcome.\nOn a leash.\n\n---\n\n"
    )
    assert format_rag([]) == ""


def test_placeholder_gets_stripped_rag_or_no_additional_information():
    prompt = f"<AdditionalInformation>\n{RAG_PLACEHOLDER}\n</AdditionalInformation>"
    rag = format_rag([Topic(source="a", title="Parking", summary="Garage.")])
    assert replace_rag_placeholder(prompt, rag) == (
        "<AdditionalInformation>\nParking\nGarage.\n\n---\n</AdditionalInformation>"
    )
    assert replace_rag_placeholder(prompt, "  \n ") == (
        "<AdditionalInformation>\nNo additional information\n</AdditionalInformation>"
    )
